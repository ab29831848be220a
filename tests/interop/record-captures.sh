#!/usr/bin/env bash
# Record reference captures of Linux Soft-RoCE talking to itself: two rxe guests (the image of
# tests/interop/vm/build-guest.sh) joined by tests/interop/vm/relay.py, which forwards every
# frame, writes one pcapng per scenario and, where a scenario asks, drops RoCEv2 frames or marks
# them CE with a fixed seed. The tools are the stock ones in the guests: ibv_rc_pingpong,
# ibv_uc_pingpong, ibv_ud_pingpong and perftest.
#
#   tests/interop/record-captures.sh [--out DIR] [--only a,b] [--keep-pcap]
#
#   --out        where the captures go (default tests/data/captures): NAME.pcapng.xz per scenario,
#                SUMMARY.md (per scenario: tools and arguments, both exit statuses, frame and
#                opcode counts, drops, CE marks, the ICRC verdict of tests/tools/roce_icrc.py)
#                and logs/ (both sides' output, the relay's counters, the guests' consoles)
#   --only       comma-separated scenario names (the list is below)
#   --keep-pcap  also keep the uncompressed pcapng files
#
# Guest A (192.0.2.1) runs the servers, guest B (192.0.2.2) the clients; the tools' TCP exchange
# of QP numbers goes over the same link (the relay never impairs it). rxe0 GID 1 is
# ::ffff:192.0.2.x (RoCE v2 over IPv4), GID 0 the IPv6 link-local address.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/interop"
OUTDIR="$ROOT/tests/data/captures"; ONLY=""; KEEP_PCAP=0
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--out DIR] [--only a,b] [--keep-pcap]" \
    --out=OUTDIR --only=ONLY --keep-pcap=KEEP_PCAP=1 -- "$@"
T0=$SECONDS
VMSTATE="${RXE_VM_STATE:-/tmp/hematite-rxe-vm}"
bash "$HERE/vm/build-guest.sh" --state "$VMSTATE" || { echo "record-captures: no guest image"; exit 1; }
IMG="$VMSTATE/image"
mkdir -p "$OUTDIR/logs"
OUTDIR="$(cd "$OUTDIR" && pwd)"
RUN="$(mktemp -d /tmp/hm-captures.XXXXXX)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ACCEL=tcg; CPU=max
if [[ -r /dev/kvm && -w /dev/kvm ]] && [[ -d /sys/module/kvm_intel || -d /sys/module/kvm_amd ]]; then ACCEL=kvm; CPU=host,-arch-capabilities; fi
IPA=192.0.2.1; IPB=192.0.2.2

relayctl() { python3 "$HERE/vm/relay.py" ctl "$RUN/relay.ctl" "$1"; }
python3 "$HERE/vm/relay.py" serve --a "$RUN/relay-a.sock,$RUN/qemu-a.sock" --b "$RUN/relay-b.sock,$RUN/qemu-b.sock" \
    --ctl "$RUN/relay.ctl" > "$RUN/relay.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$RUN/relay.ctl" ] && break; sleep 0.1; done
relayctl '{"cmd":"stats"}' > /dev/null || { cat "$RUN/relay.log"; echo "record-captures: the relay did not start"; exit 1; }

boot() { # NAME IP MAC
    local n="$1"
    qemu-system-x86_64 -accel "$ACCEL" -M pc -cpu "$CPU" -smp 1 -m 512 -nodefaults -no-reboot \
        -display none -monitor none -kernel "$IMG/vmlinux" -initrd "$IMG/initramfs.cpio" \
        -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off hm.name=$n hm.ip=$2/24" \
        -serial "file:$RUN/$n.console" \
        -chardev "socket,id=ctl,path=$RUN/$n.ctl,server=on,wait=off" -serial chardev:ctl \
        -netdev "dgram,id=n0,local.type=unix,local.path=$RUN/qemu-${n,,}.sock,remote.type=unix,remote.path=$RUN/relay-${n,,}.sock" \
        -device "virtio-net-pci,netdev=n0,mac=$3" > "$RUN/$n.qemu" 2>&1 &
    PIDS+=($!)
}
relayctl "{\"cmd\":\"pcap\",\"path\":\"$RUN/boot.pcapng\"}" > /dev/null
boot A $IPA 52:54:00:00:00:0a
boot B $IPB 52:54:00:00:00:0b
for n in A B; do
    for _ in $(seq 1800); do grep -q '^RXE-READY' "$RUN/$n.console" 2> /dev/null && break; sleep 0.1; done
    grep -q '^RXE-READY' "$RUN/$n.console" || { tail "$RUN/$n.console" "$RUN/$n.qemu"; echo "record-captures: guest $n did not come up"; exit 1; }
done
echo "== both guests up in $((SECONDS - T0)) s ($ACCEL): $(grep -h '^RXE-READY' "$RUN/A.console" "$RUN/B.console" | tr '\n' ' ')"
vm() { local n="$1" t="$2"; shift 2; python3 "$HERE/vm/vmctl.py" --timeout "$t" "$RUN/$n.ctl" "$*"; }
vm B 20 "ping -c 2 -W 3 $IPA" > /dev/null || { echo "record-captures: no IP between the guests"; exit 1; }
relayctl '{"cmd":"pcap","path":""}' > /dev/null

want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
SUM="$OUTDIR/SUMMARY.md"
pass=0; fail=0; failed=()
{
    echo "# Soft-RoCE reference captures"
    echo
    echo "Recorded $(date -u +%Y-%m-%d) by tests/interop/record-captures.sh: two Linux Soft-RoCE (rdma_rxe) guests,"
    echo "Debian kernel $(cat "$IMG/kver"), rdma-core and perftest from Debian 12, joined by tests/interop/vm/relay.py."
    echo "A = $IPA (MAC 52:54:00:00:00:0a, servers), B = $IPB (MAC 52:54:00:00:00:0b, clients)."
    echo "pcapng interface 0 is A to B, 1 is B to A; frames the relay dropped are in the file with the comment"
    echo "\"relay: dropped\" (the receiver never saw them), CE-marked frames with \"relay: CE marked\"."
    echo "The TCP connection of each tool's QP exchange is in the captures too (never impaired)."
    echo
    echo "| capture | tools (server in A; the client in B adds $IPA) | impairment | rc A/B | frames | RoCEv2 | BTH opcodes (count) | dropped | CE marked | ICRC |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$SUM"

# cap NAME TIMEOUT IMPAIRMENT-JSON SERVER-COMMAND  (the client runs the same command plus A's address)
cap() {
    local name="$1" t="$2" imp="$3" cmd="$4" t1=$SECONDS
    want "$name" || return 0
    local pc="$RUN/$name.pcapng" arc brc
    relayctl "{\"cmd\":\"set\"${imp:+,$imp}}" > /dev/null
    relayctl "{\"cmd\":\"pcap\",\"path\":\"$pc\"}" > /dev/null
    vm A 10 "rm -f /tmp/s.out /tmp/s.rc; ( timeout -s KILL $t $cmd > /tmp/s.out 2>&1; echo \$? > /tmp/s.rc ) &" > /dev/null
    vm A 30 "n=0; until netstat -ltn | grep -q ':18515 ' || [ \$n -ge 200 ]; do n=\$((n+1)); sleep 0.1; done" > /dev/null
    vm B $((t + 20)) "timeout -s KILL $t $cmd $IPA" > "$OUTDIR/logs/$name.B.txt" 2>&1; brc=$?
    vm A $((t + 20)) "n=0; until [ -e /tmp/s.rc ] || [ \$n -ge $((t * 10)) ]; do n=\$((n+1)); sleep 0.1; done; cat /tmp/s.out; exit \$(cat /tmp/s.rc 2>/dev/null || echo 124)" > "$OUTDIR/logs/$name.A.txt" 2>&1; arc=$?
    [ "$arc" = 0 ] && [ "$brc" = 0 ] || vm A 10 "killall -9 ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw 2>/dev/null; true" > /dev/null
    relayctl '{"cmd":"pcap","path":""}' > "$OUTDIR/logs/$name.relay.json"
    relayctl '{"cmd":"set"}' > /dev/null
    local line; line=$(python3 "$HERE/vm/capsum.py" "$pc" "$ROOT/tests/tools/roce_icrc.py")
    local icrc_ok; icrc_ok=$(sed -n 's/.*icrc_rc=\([0-9]*\).*/\1/p' <<<"$line"); line="${line% icrc_rc=*}"
    xz -9e -T1 -c "$pc" > "$OUTDIR/$name.pcapng.xz"
    [ $KEEP_PCAP = 1 ] && cp "$pc" "$OUTDIR/$name.pcapng"
    rm -f "$pc"
    local verdict
    if [ "$arc" = 0 ] && [ "$brc" = 0 ] && [ "$icrc_ok" = 0 ]; then pass=$((pass + 1)); verdict=ok; else fail=$((fail + 1)); failed+=("$name"); verdict=FAIL; fi
    printf '%-5s %-24s %3ss  rc A %s B %s  %s  (%s)\n' "$verdict" "$name" $((SECONDS - t1)) "$arc" "$brc" "$line" "$(du -h "$OUTDIR/$name.pcapng.xz" | cut -f1)"
    echo "| $name.pcapng.xz | \`$cmd\` | ${imp:-none} | $arc/$brc | $line |" >> "$SUM"
}
# perftest: RoCE port 1, GID 1 (IPv4), -F: no CPU frequency check
P="-d rxe0 -i 1 -F"
echo "== scenarios"
cap rc_pingpong         60 "" "ibv_rc_pingpong -d rxe0 -g 1 -n 20 -s 4096"
cap rc_send_bw          60 "" "ib_send_bw $P -x 1 -n 50 -s 8192"
cap rc_send_small       60 "" "ib_send_bw $P -x 1 -n 50 -s 64"
cap rc_write_bw         60 "" "ib_write_bw $P -x 1 -n 50 -s 8192"
cap rc_write_small      60 "" "ib_write_bw $P -x 1 -n 50 -s 64"
cap rc_read_bw          60 "" "ib_read_bw $P -x 1 -n 50 -s 8192"
cap rc_read_small       60 "" "ib_read_bw $P -x 1 -n 50 -s 64"
cap rc_atomic_fadd      60 "" "ib_atomic_bw $P -x 1 -n 50 -A FETCH_AND_ADD"
cap rc_atomic_cswap     60 "" "ib_atomic_bw $P -x 1 -n 50 -A CMP_AND_SWAP"
cap rc_send_lat         60 "" "ib_send_lat $P -x 1 -n 50 -s 1024"
cap uc_pingpong         60 "" "ibv_uc_pingpong -d rxe0 -g 1 -n 20 -s 4096"
cap uc_send_bw          60 "" "ib_send_bw $P -x 1 -c UC -n 50 -s 8192"
cap uc_write_bw         60 "" "ib_write_bw $P -x 1 -c UC -n 50 -s 8192"
cap ud_pingpong         60 "" "ibv_ud_pingpong -d rxe0 -g 1 -n 20 -s 1024"
cap ud_send_bw          60 "" "ib_send_bw $P -x 1 -c UD -n 50 -s 1024"
cap ipv6_rc_pingpong    60 "" "ibv_rc_pingpong -d rxe0 -g 0 -n 20 -s 2048"
cap ipv6_rc_write_bw    60 "" "ib_write_bw $P -x 0 -n 50 -s 8192"
cap ipv6_rc_read_bw     60 "" "ib_read_bw $P -x 0 -n 50 -s 8192"
cap loss1_rc_write_bw  120 '"drop":0.01,"seed":1' "ib_write_bw $P -x 1 -n 200 -s 16384"
cap loss1_rc_read_bw   120 '"drop":0.01,"seed":2' "ib_read_bw $P -x 1 -n 200 -s 16384"
cap loss1_rc_send_bw   120 '"drop":0.01,"seed":3' "ib_send_bw $P -x 1 -n 200 -s 16384"
cap loss1_rc_pingpong  120 '"drop":0.01,"seed":4' "ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096"
cap ce5_rc_write_bw     60 '"ce":0.05,"seed":5' "ib_write_bw $P -x 1 -n 100 -s 16384 --tclass=2"
cap ce5_ipv6_rc_write_bw 60 '"ce":0.05,"seed":6' "ib_write_bw $P -x 0 -n 100 -s 16384 --tclass=2"
# path MTU 4096: both links at MTU 4200
if want mtu4096_rc_write_bw || want mtu4096_rc_pingpong; then
    vm A 10 "ip link set eth0 mtu 4200" && vm B 10 "ip link set eth0 mtu 4200" && sleep 1
    cap mtu4096_rc_pingpong 60 "" "ibv_rc_pingpong -d rxe0 -g 1 -m 4096 -n 20 -s 16384"
    cap mtu4096_rc_write_bw 60 "" "ib_write_bw $P -x 1 -m 4096 -n 50 -s 16384"
fi

for n in A B; do vm "$n" 10 "rdma statistic show link rxe0/1" > "$OUTDIR/logs/rxe-counters.$n.txt" 2>&1; done
cp "$RUN/A.console" "$OUTDIR/logs/console.A.txt"; cp "$RUN/B.console" "$OUTDIR/logs/console.B.txt"
{
    echo
    echo "$pass captures recorded with both exit statuses 0 and every ICRC good, $fail not; $((SECONDS - T0)) s in all ($ACCEL)."
    for f in "${failed[@]}"; do echo "- $f: see logs/$f.A.txt and logs/$f.B.txt"; done
} >> "$SUM"
echo "record-captures: $pass ok, $fail failed in $((SECONDS - T0)) s; $(du -ch "$OUTDIR"/*.pcapng.xz 2> /dev/null | tail -1 | cut -f1) of captures in $OUTDIR"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# Interoperability with Linux Soft-RoCE (rdma_rxe, kernel 6.1): one simulated Hematite NIC and
# one rxe VM on the same datagram link. The VM is booted by the project's reference tool
# (../shared/tools/rxe-peer/run-rxe-peers.sh, peer mode); the QP exchange goes over the VM's
# forwarded management port (127.0.0.1:47120 -> guest :18515); Hematite's device process
# writes a pcap of the link, which the independent ICRC checker reads after every scenario.
#
#   tests/interop/interop.sh [--quick] [--profile release|test] [--only a,b]
#
#   --quick   the suite's subset: ibv_rc_pingpong, and one RDMA WRITE and one RDMA READ run
#             with 1% loss, each with Hematite as requester and as responder (-b)
#   (default) the full matrix (docs/interop.md)
#
# Roles: the host side is always the TCP client (the VM's management NIC only forwards in);
# so a perftest run has Hematite as the requester, and its bidirectional form (-b) has both
# sides request and respond. ibv_rc_pingpong is symmetric.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
QUICK=0; PROFILE=test; ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; shift ;;
        --profile) PROFILE="$2"; shift 2 ;;
        --only) ONLY="$2"; shift 2 ;;
        *) echo "usage: $0 [--quick] [--profile release|test] [--only a,b]" >&2; exit 2 ;;
    esac
done
case "$PROFILE" in release) TDIR=target/release ;; *) TDIR=target/debug ;; esac
SHARED="${HEMATITE_SHARED:-$ROOT/../shared}"
TOOL="$SHARED/tools/rxe-peer"
[ -x "$TOOL/run-rxe-peers.sh" ] || [ -f "$TOOL/run-rxe-peers.sh" ] || { echo "interop: $TOOL/run-rxe-peers.sh not found (set HEMATITE_SHARED)"; exit 1; }

OUT="${OUT:-$ROOT/build/interop}"
rm -rf "$OUT"; mkdir -p "$OUT/logs" "$OUT/pcap"
echo "== building hematite-sim, the provider and hematite-run ($PROFILE profile)"
{ cargo build -q --profile "$PROFILE" -p hematite-sim --bin hematite-sim && cargo build -q --profile "$PROFILE" -p hematite-verbs -p hematite-run; } || exit 1
RUN="$ROOT/$TDIR/hematite-run"
export HEMATITE_SIM="$ROOT/$TDIR/hematite-sim" HEMATITE_PROVIDER="$ROOT/$TDIR/libhematite_verbs.so"
export HEMATITE_FW="$ROOT/build/fw/firmware.hex"

# ---------------------------------------------------------------- the rxe VM
VMSTATE="${RXE_STATE:-/tmp/hematite-rxe}"
echo "== booting the Soft-RoCE VM (qemu TCG; first run downloads the guest packages)"
( MGMT=1 STATE="$VMSTATE" bash "$TOOL/run-rxe-peers.sh" peer > "$OUT/logs/vm.log" 2>&1 ) &
VMJOB=$!
STATE="$(mktemp -d /tmp/hm-interop.XXXXXX)"
cleanup() {
    "$RUN" --state "$STATE" --stop > /dev/null 2>&1
    local p; p=$(sed -nE 's/.*stop: kill ([0-9]+).*/\1/p' "$OUT/logs/vm.log" | head -1)
    [ -n "$p" ] && kill "$p" 2>/dev/null
    kill $VMJOB 2>/dev/null; wait $VMJOB 2>/dev/null
    rm -rf "$STATE"
}
trap cleanup EXIT
for _ in $(seq 600); do grep -q "RXE-READY" "$OUT/logs/vm.log" && break; kill -0 $VMJOB 2>/dev/null || break; sleep 0.5; done
grep -q "RXE-READY" "$OUT/logs/vm.log" || { tail -20 "$OUT/logs/vm.log"; echo "interop: the rxe VM did not come up"; exit 1; }
sleep 1
RELAY=$(sed -nE 's/.*bind (unix:[^ ]+) .*/\1/p' "$OUT/logs/vm.log" | head -1)
QEMU=$(sed -nE 's/.*send frames to (unix:[^ ]+).*/\1/p' "$OUT/logs/vm.log" | head -1)
CTL=$(sed -nE "s/.*vmctl.py ([^ ]+) '.*/\1/p" "$OUT/logs/vm.log" | head -1)
HPORT=$(sed -nE 's/.*TCP 127\.0\.0\.1:([0-9]+) ->.*/\1/p' "$OUT/logs/vm.log" | head -1)
VMIP=$(sed -nE 's/.*RXE-READY.* ip=([0-9.]+).*/\1/p' "$OUT/logs/vm.log" | head -1)
[ -n "$RELAY" ] && [ -n "$QEMU" ] && [ -n "$CTL" ] && [ -n "$HPORT" ] || { cat "$OUT/logs/vm.log"; echo "interop: could not read the VM's endpoints"; exit 1; }
# our address: the next one in the VM's /24
OURIP="${VMIP%.*}.2"
echo "   VM $VMIP (rxe0, GID index 1), Hematite $OURIP; link $RELAY <- -> $QEMU; handshake 127.0.0.1:$HPORT"
vm() { python3 "$TOOL/vmctl.py" --timeout "${VMT:-240}" "$CTL" "$*"; }
vm "rdma link show; ibv_devinfo -d rxe0 | grep -E 'state|active_mtu'" > "$OUT/logs/vm-devinfo.txt" 2>&1

pass=0; fail=0; failed=(); MATRIX="$OUT/matrix.txt"; : > "$MATRIX"
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
LOSS_NOW=""
# (Re)starts the Hematite NIC on the link, with the given loss (the pcap starts afresh).
nic() {
    local loss="$1"
    [ "$loss" = "$LOSS_NOW" ] && return 0
    "$RUN" --state "$STATE" --stop > /dev/null 2>&1
    local extra=(); [ "$loss" != 0 ] && extra=(--loss "$loss")
    "$RUN" --state "$STATE" --link "$RELAY,$QEMU,$OURIP" "${extra[@]}" --check > "$OUT/logs/check.txt" 2>&1 ||
        { cat "$OUT/logs/check.txt"; echo "interop: hematite-run --check failed"; exit 1; }
    LOSS_NOW="$loss"
}

# scenario NAME LOSS GUEST_CMD -- HOST_CMD...: the guest side runs first (it listens).
scenario() {
    local name="$1" loss="$2" gcmd="$3"; shift 3; [ "$1" = "--" ] && shift
    want "$name" || return 0
    nic "$loss"
    local go="$OUT/logs/$name.guest" ho="$OUT/logs/$name.host" t0=$SECONDS
    local pc="$STATE/nic0.pcap" before; before=$(stat -c %s "$pc" 2>/dev/null || echo 0)
    ( vm "timeout 200 $gcmd" > "$go" 2>&1; echo "guest-rc=$?" >> "$go" ) &
    local gj=$!
    sleep 4
    timeout -k 5 230 "$RUN" --state "$STATE" -- stdbuf -oL "$@" > "$ho" 2>&1
    local hrc=$?
    wait $gj
    local grc; grc=$(sed -nE 's/^guest-rc=([0-9]+)/\1/p' "$go" | tail -1)
    # the frames of this scenario: the ICRC of every RoCE frame on the link, both directions
    local icrc; icrc=$(python3 "$TOOL/roce_icrc.py" "$pc" 2>&1 | tail -1)
    local fig; fig=$(awk '/#bytes/{getline; print; exit}' "$ho"); [ -z "$fig" ] && fig=$(grep -h "iters in" "$ho" | head -1)
    fig=$(echo "$fig" | tr -s ' \t' ' ')
    if [ "$hrc" = 0 ] && [ "$grc" = 0 ] && grep -q "ICRC good [1-9][0-9]*, bad 0" <<<"$icrc"; then
        pass=$((pass + 1)); printf 'ok    %-26s %3ss  %s | %s\n' "$name" $((SECONDS - t0)) "$fig" "${icrc##*: }"
        echo "| $name | pass | $fig | ${icrc##*: } |" >> "$MATRIX"
    else
        fail=$((fail + 1)); failed+=("$name")
        printf 'FAIL  %-26s host rc=%s guest rc=%s %s\n' "$name" "$hrc" "$grc" "$icrc"
        tail -n 4 "$ho" | sed 's/^/   host: /'; tail -n 4 "$go" | sed 's/^/   guest: /'
        echo "| $name | FAIL (host $hrc, guest $grc) | $fig | ${icrc##*: } |" >> "$MATRIX"
    fi
    cp -f "$pc" "$OUT/pcap/$name.pcap" 2>/dev/null
    : "$before"
}

G="-d rxe0 -x 1 -u 18"     # rxe: GID index 1 (IPv4-mapped), local ACK timeout ~1 s (slow peer)
H="-d hematite0 -x 0 -p $HPORT"
pp() { scenario "$1" "$2" "ibv_rc_pingpong -d rxe0 -g 1 $3" -- ibv_rc_pingpong -d hematite0 -g 0 -p "$HPORT" $3 127.0.0.1; }
pf() { local name="$1" loss="$2" tool="$3"; shift 3; scenario "$name" "$loss" "$tool $G -m 1024 $*" -- "$tool" $H -m 1024 "$@" 127.0.0.1; }

pp pingpong 0 "-n 50"
if [ $QUICK -eq 1 ]; then
    pf write_loss_req 0.01 ib_write_bw -s 65536 -n 50
    pf write_loss_bidir 0.01 ib_write_bw -b -s 65536 -n 50
    pf read_loss_req 0.01 ib_read_bw -s 65536 -n 50
    pf read_loss_bidir 0.01 ib_read_bw -b -s 65536 -n 50
else
    pp pingpong_4k_200 0 "-s 4096 -n 200"
    for s in 1 64 4096 65536; do
        pf "write_bw_$s" 0 ib_write_bw -s $s -n 50
        pf "write_bw_bidir_$s" 0 ib_write_bw -b -s $s -n 50
        pf "send_bw_$s" 0 ib_send_bw -s $s -n 50
        pf "send_bw_bidir_$s" 0 ib_send_bw -b -s $s -n 50
        pf "read_bw_$s" 0 ib_read_bw -s $s -n 50
        pf "read_bw_bidir_$s" 0 ib_read_bw -b -s $s -n 50
    done
    pf atomic_fadd 0 ib_atomic_bw -A FETCH_AND_ADD -n 50
    pf atomic_cas 0 ib_atomic_bw -A CMP_AND_SWAP -n 50
    pf atomic_fadd_bidir 0 ib_atomic_bw -b -A FETCH_AND_ADD -n 50
    pf send_lat_64 0 ib_send_lat -s 64 -n 50
    pf send_lat_4096 0 ib_send_lat -s 4096 -n 50
    pf write_loss_req 0.01 ib_write_bw -s 65536 -n 100
    pf write_loss_bidir 0.01 ib_write_bw -b -s 65536 -n 100
    pf send_loss_req 0.01 ib_send_bw -s 65536 -n 100
    pf send_loss_bidir 0.01 ib_send_bw -b -s 65536 -n 100
    pf read_loss_req 0.01 ib_read_bw -s 65536 -n 100
    pf read_loss_bidir 0.01 ib_read_bw -b -s 65536 -n 100
    pp pingpong_loss 0.01 "-s 4096 -n 100"
fi

echo
for f in "${failed[@]}"; do echo "FAILED: $f (logs: $OUT/logs/$f.*)"; done
echo "interop: $pass passed, $fail failed (matrix: $MATRIX)"
[ "$fail" -eq 0 ]

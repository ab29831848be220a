#!/usr/bin/env bash
# Interoperability with Linux Soft-RoCE (rdma_rxe, Debian 12 kernel 6.1): one simulated Hematite
# NIC and one rxe VM on the same datagram link, stock tools on both sides.
#
#   tests/interop/interop.sh [--quick] [--profile release|test] [--only a,b] [--keep]
#
#   --quick    the suite's subset: ibv_rc_pingpong, ibv_uc_pingpong, and one RDMA WRITE and one
#              RDMA READ run with 1% loss, each with Hematite as requester (TCP client) and as
#              responder (TCP server)
#   (default)  the full matrix (docs/interop.md): sizes 1 B..64 KiB, every perftest tool and both
#              atomics, path MTU 1024 and 4096, IPv6, 1% loss, immediate data and SEND with
#              invalidate (hm_imm_inv), each in both directions
#   --only     comma-separated scenario names (see the matrix; `_req` / `_resp` suffixes)
#   --keep     leave the VM running at the end (its control socket is printed)
#
# The guest image (Debian 12 kernel + initramfs with rdma_rxe, rdma-core, perftest) is built from
# Debian packages and cached by tests/interop/vm/build-guest.sh (under $RXE_VM_STATE, default
# /tmp/hematite-rxe-vm); this script adds our own verbs program (hm_imm_inv) to it as a second
# cpio archive and boots it itself, with:
#   eth0  the RoCE link: a qemu `-netdev dgram` on AF_UNIX sockets, joined to Hematite's NIC 0
#         (hematite-run --link), which writes a pcap of every frame in both directions;
#   eth1  an isolated management NIC (qemu user net, restrict=on) with two forwards for the
#         QP exchange: host 127.0.0.1:$PORT -> guest :18515 (Hematite is the TCP client) and
#         guest 10.0.2.100:18515 -> host 127.0.0.1:$PORT+1 (Hematite is the TCP server);
#   ttyS1 a command channel (tests/interop/vm/vmctl.py; the guest's side is tests/interop/vm/init).
# A fresh NIC (and pcap) per scenario. Checks per scenario: both sides' exit status, the ICRC of
# every RoCE frame on the link (the independent checker tests/tools/roce_icrc.py), and the PSN and
# opcode sequence of every frame Hematite sent (tests/interop/roce_seq.py); rxe's frames are
# run through the same sequence checker for information (its verdict is in the matrix, not in
# pass/fail: rxe is the reference here), which also counts rxe's retransmissions.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
QUICK=0; PROFILE=test; ONLY=""; KEEP=0
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--quick] [--profile release|test] [--only a,b] [--keep]" \
    --quick=QUICK=1 --profile=PROFILE --only=ONLY --keep=KEEP=1 -- "$@"
case "$PROFILE" in release) TDIR=target/release ;; *) TDIR=target/debug ;; esac
HERE="$ROOT/tests/interop"
ICRC="$ROOT/tests/tools/roce_icrc.py"
[ -f "$ICRC" ] || { echo "interop: $ICRC not found"; exit 1; }
HPORT="${INTEROP_PORT:-47120}"; RPORT=$((HPORT + 1))
T_START=$SECONDS

OUT="${OUT:-$ROOT/build/interop}"
rm -rf "$OUT"; mkdir -p "$OUT/logs" "$OUT/pcap" "$OUT/vm" "$OUT/guest/usr/bin"
echo "== building hematite-sim, the provider, hematite-run ($PROFILE profile) and hm_imm_inv"
{ cargo build -q --profile "$PROFILE" -p hematite-sim --bin hematite-sim && cargo build -q --profile "$PROFILE" -p hematite-verbs -p hematite-run; } || exit 1
cc -O2 -Wall -Wextra -Werror -o "$OUT/guest/usr/bin/hm_imm_inv" "$HERE/hm_imm_inv.c" -libverbs || { echo "interop: hm_imm_inv does not build"; exit 1; }
RUN="$ROOT/$TDIR/hematite-run"
IMM="$OUT/guest/usr/bin/hm_imm_inv"
export HEMATITE_SIM="$ROOT/$TDIR/hematite-sim" HEMATITE_PROVIDER="$ROOT/$TDIR/libhematite_verbs.so"
export HEMATITE_FW="$ROOT/build/fw/firmware.hex"
[ -f "$HEMATITE_FW" ] || { echo "interop: $HEMATITE_FW missing (./hematite fw)"; exit 1; }

# ---------------------------------------------------------------- the rxe VM
VMSTATE="${RXE_VM_STATE:-/tmp/hematite-rxe-vm}"
echo "== guest image (tests/interop/vm/build-guest.sh, cached under $VMSTATE; the first run downloads the guest packages)"
bash "$HERE/vm/build-guest.sh" --state "$VMSTATE" > "$OUT/logs/vm-build.log" 2>&1 ||
    { tail -20 "$OUT/logs/vm-build.log"; echo "interop: the guest image could not be built"; exit 1; }
sed 's/^/   /' "$OUT/logs/vm-build.log" | tail -1
W="$VMSTATE/image"
(cd "$OUT/guest" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$OUT/vm/extra.cpio" || exit 1
cat "$W/initramfs.cpio" "$OUT/vm/extra.cpio" > "$OUT/vm/initramfs.cpio"

VMD="$OUT/vm"
ACCEL=tcg; CPU=max
if [[ -r /dev/kvm && -w /dev/kvm ]] && [[ -d /sys/module/kvm_intel || -d /sys/module/kvm_amd ]]; then ACCEL=kvm; CPU=host,-arch-capabilities; fi
VMIP=192.0.2.1; OURIP=192.0.2.2; GUESTFWD=10.0.2.100
STATE="$(mktemp -d /tmp/hm-interop.XXXXXX)"
QPID=""
cleanup() {
    "$RUN" --state "$STATE" --stop > /dev/null 2>&1
    if [ -n "$QPID" ] && [ "$KEEP" = 0 ]; then kill "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null; fi
    rm -rf "$STATE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# boot_vm N: (re)start the guest; its console (kernel messages) goes to console.log, or to
# console-N.log for a reboot N > 0 (see rerun in scenario below)
CONSOLE="$VMD/console.log"
boot_vm() {
    if [ -n "$QPID" ]; then kill -KILL "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null; QPID=""; fi
    rm -f "$VMD/ctl" "$VMD/qemu.sock"
    CONSOLE="$VMD/console.log"; [ "$1" -gt 0 ] && CONSOLE="$VMD/console-$1.log"
    qemu-system-x86_64 -accel "$ACCEL" -M pc -cpu "$CPU" -smp 1 -m 768 -nodefaults -no-reboot \
        -display none -monitor none -kernel "$W/vmlinux" -initrd "$VMD/initramfs.cpio" \
        -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off hm.name=A hm.ip=$VMIP/24 hm.mgmt=10.0.2.15/24" \
        -serial "file:$CONSOLE" \
        -chardev "socket,id=ctl,path=$VMD/ctl,server=on,wait=off" -serial chardev:ctl \
        -netdev "dgram,id=n0,local.type=unix,local.path=$VMD/qemu.sock,remote.type=unix,remote.path=$VMD/wire.sock" \
        -device "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01" \
        -netdev "user,id=m0,restrict=on,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:$HPORT-:18515,guestfwd=tcp:$GUESTFWD:18515-cmd:python3 $HERE/tcp_pipe.py 127.0.0.1 $RPORT" \
        -device "virtio-net-pci,netdev=m0,mac=52:54:00:00:01:01" > "$VMD/qemu.log" 2>&1 &
    QPID=$!
    for _ in $(seq 1800); do grep -q "^RXE-READY" "$CONSOLE" 2>/dev/null && break; kill -0 $QPID 2>/dev/null || break; sleep 0.1; done
    grep -q "^RXE-READY" "$CONSOLE" 2>/dev/null ||
        { tail -20 "$CONSOLE" "$VMD/qemu.log" 2>/dev/null; echo "interop: the rxe VM did not come up within 180 s"; exit 1; }
}
echo "== booting the Soft-RoCE VM ($ACCEL)"
boot_vm 0
echo "   $(grep '^RXE-READY' "$CONSOLE") (boot $((SECONDS - T_START)) s incl. build)"
vm() { python3 "$HERE/vm/vmctl.py" --timeout "${VMT:-30}" "$VMD/ctl" "$*"; }
vm "rdma link show; ibv_devinfo -v -d rxe0 | grep -E 'state|active_mtu|GID'" > "$OUT/logs/vm-devinfo.txt" 2>&1
echo "   VM $VMIP (rxe0: GID 1 ::ffff:$VMIP, GID 0 its IPv6 link-local), Hematite $OURIP;"
echo "   QP exchange: host 127.0.0.1:$HPORT -> guest :18515, guest $GUESTFWD:18515 -> host 127.0.0.1:$RPORT"

# Guest commands run in the guest's background (the command channel stays free); output in
# /tmp/NAME.out, exit status in /tmp/NAME.rc; `timeout -s KILL` bounds each.
gstart() { vm "rm -f /tmp/$1.out /tmp/$1.rc; ( timeout -s KILL $2 $3 > /tmp/$1.out 2>&1; echo \$? > /tmp/$1.rc ) &" > /dev/null; }
# (the guest side's loops are bounded by the guest's uptime clock: a TCG guest runs slowly; a
# command must not `exit`, which would end the guest's command loop)
gwait() { VMT=$(($2 + 20)) vm "e=\$((\$(cut -d. -f1 /proc/uptime) + $2)); while [ ! -e /tmp/$1.rc ] && [ \$(cut -d. -f1 /proc/uptime) -lt \$e ]; do sleep 0.2; done; cat /tmp/$1.out; (exit \$(cat /tmp/$1.rc 2>/dev/null || echo 124))"; }
glisten() { VMT=40 vm "e=\$((\$(cut -d. -f1 /proc/uptime) + 30)); until netstat -ltn | grep -q ':18515 ' || [ \$(cut -d. -f1 /proc/uptime) -ge \$e ]; do sleep 0.1; done; netstat -ltn | grep -q ':18515 '"; }
gkill() { vm "killall -9 ibv_rc_pingpong ibv_uc_pingpong ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_send_lat hm_imm_inv 2>/dev/null; true" > /dev/null 2>&1; }
hlisten() {
    local p; p=$(printf ':%04X ' "$RPORT")
    for _ in $(seq 600); do
        cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" {print $2 " "}' | grep -q "$p" && return 0
        sleep 0.1
    done
    return 1
}

pass=0; fail=0; failed=(); reruns=(); REBOOTS=0; MAX_REBOOTS=$([ $QUICK -eq 1 ] && echo 1 || echo 2); MATRIX="$OUT/matrix.md"
echo "| scenario | Hematite | result | figures (perftest / pingpong / hm_imm_inv, Hematite's side) | frames: ICRC | lost on the link (from Hematite + to Hematite) | Hematite's PSN/opcode sequence | rxe's frames |" > "$MATRIX"
echo "|---|---|---|---|---|---|---|---|" >> "$MATRIX"
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# Progress on a terminal (nothing when stderr is a file or a pipe): one status line on stderr,
# the scenarios done of all, the failures, the one running and the time left by the mean time
# of the scenarios done so far. The list is walked once with COUNTING=1 to count it.
COUNTING=0; TOTAL=0; T_SCEN=$SECONDS
hms() { printf '%d:%02d:%02d' $(($1 / 3600)) $(($1 / 60 % 60)) $(($1 % 60)); }
status() {
    [ -t 2 ] || return 0
    local done=$((pass + fail)) el=$((SECONDS - T_SCEN)) left="?"
    [ "$done" -gt 0 ] && left=$(hms $((el * (TOTAL - done) / done)))
    printf '\r\033[Kinterop: %d/%d scenarios done, %d failed, %s running, %s elapsed, about %s left' \
        "$done" "$TOTAL" "$fail" "$1" "$(hms "$el")" "$left" >&2
}
status_clear() { [ -t 2 ] && printf '\r\033[K' >&2; return 0; }

# A fresh Hematite NIC on the link (and a fresh pcap). The device starts with the scenario's
# first program, which therefore carries the transmit loss (LOSS_ARGS; --check starts nothing).
LOSS_ARGS=()
nic() {
    "$RUN" --state "$STATE" --stop > /dev/null 2>&1
    LOSS_ARGS=(); [ "$1" != 0 ] && LOSS_ARGS=(--loss "$1")
    "$RUN" --state "$STATE" --link "unix:$VMD/wire.sock,unix:$VMD/qemu.sock,$OURIP" --check > "$OUT/logs/check.txt" 2>&1
}

# scenario NAME DIR LOSS GUEST_CMD -- HOST_CMD...
#   DIR req:  Hematite is the TCP client: the guest's server starts first, the host connects
#   DIR resp: Hematite is the TCP server: the host's server starts first, the guest connects
# (for perftest the TCP client is the requester; ibv_rc_pingpong and hm_imm_inv exchange both ways)
scenario() {
    local name="$1" dir="$2" loss="$3" gcmd="$4"; shift 4; [ "$1" = "--" ] && shift
    want "$name" || return 0
    if [ "$COUNTING" = 1 ]; then TOTAL=$((TOTAL + 1)); return 0; fi
    status "$name"
    local ho="$OUT/logs/$name.host" go="$OUT/logs/$name.guest" t0=$SECONDS hrc grc note=""
    if ! nic "$loss"; then
        status_clear
        fail=$((fail + 1)); failed+=("$name"); cat "$OUT/logs/check.txt"
        echo "| $name | $dir | FAIL (NIC did not start) | | | | |" >> "$MATRIX"; return
    fi
    if [ "$dir" = req ]; then
        gstart "$name" 200 "$gcmd"
        glisten || note="guest server not listening; "
        timeout -k 5 200 "$RUN" --state "$STATE" "${LOSS_ARGS[@]}" -- stdbuf -oL "$@" > "$ho" 2>&1
        hrc=$?
        gwait "$name" 60 > "$go" 2>&1
        grc=$?
    else
        ( timeout -k 5 230 "$RUN" --state "$STATE" "${LOSS_ARGS[@]}" -- stdbuf -oL "$@" > "$ho" 2>&1; echo "host-rc=$?" >> "$ho" ) &
        local hj=$!
        hlisten || note="host server not listening; "
        gstart "$name" 200 "$gcmd"
        gwait "$name" 215 > "$go" 2>&1
        grc=$?
        wait $hj
        hrc=$(sed -nE 's/^host-rc=([0-9]+)$/\1/p' "$ho" | tail -1)
    fi
    [ "$grc" = 0 ] || gkill
    # perftest in the TCG guest calibrates its cycle counter against the guest's clock when it
    # writes its report, and often cannot ("Correlation coefficient r^2 ... < 0.9", "Can't
    # produce a report"): the exchange itself finished. That one failure is not the guest's
    # verdict: it is then taken from Hematite's side (its own perftest ran every iteration and
    # exited 0) and from the capture (every ICRC and Hematite's sequence checked below).
    local calib=0
    if [ "$grc" != 0 ] && grep -q "Correlation coefficient" "$go" && grep -q "Can't produce a report" "$go" &&
        ! grep -qiE "couldn't|failed|error|unable|timeout" "$go" && [ "${hrc:-1}" = 0 ]; then
        calib=1; grc=0; note="guest perftest could not calibrate its clock (verdict: Hematite's completions and the capture); "
    fi
    "$RUN" --state "$STATE" --stop > /dev/null 2>&1       # flushes the pcap
    # frames the link lost (the device prints its counters when it stops)
    local lost; lost=$(sed -nE 's/.* lost ([0-9]+) lost-rx ([0-9]+) .*/\1+\2/p' "$STATE/nic0.log" 2>/dev/null | tail -1)
    [ -z "$lost" ] && lost="?"
    local pc="$OUT/pcap/$name.pcap"
    cp -f "$STATE/nic0.pcap" "$pc" 2>/dev/null
    local icrc irc seq peer src=0 prc=0
    # (exit 0: every RoCEv2 frame's ICRC is good and there is at least one)
    python3 "$ICRC" "$pc" > "$OUT/logs/$name.icrc" 2>&1; irc=$?
    icrc=$(grep -h "ICRC good" "$OUT/logs/$name.icrc" | tail -1); [ -n "$icrc" ] || icrc=$(tail -1 "$OUT/logs/$name.icrc")
    seq=$(python3 "$HERE/roce_seq.py" --src-mac 02:48:4d:00:00:01 "$pc" > "$OUT/logs/$name.seq" 2>&1; echo "rc=$?")
    src=${seq#rc=}; seq=$(tail -1 "$OUT/logs/$name.seq")
    peer=$(python3 "$HERE/roce_seq.py" --src-mac 52:54:00:00:00:01 "$pc" > "$OUT/logs/$name.seq-rxe" 2>&1; echo "rc=$?")
    prc=${peer#rc=}; peer=$(tail -1 "$OUT/logs/$name.seq-rxe")
    # UC one way (perftest bw with Hematite as the receiver): a UC responder sends nothing at
    # all, so there is no frame of Hematite's to check (roce_seq's exit 2), and there must be none
    if [[ "$name" == uc_*_bw_resp ]] && [ "$src" = 2 ] && grep -q "checked 0 frames" "$OUT/logs/$name.seq"; then
        src=0; seq="none sent (a UC receiver answers nothing)"
    fi
    local fig
    fig=$(awk '/#bytes/{getline; print; exit}' "$ho")
    [ -z "$fig" ] && fig=$(grep -h "iters in\|hm_imm_inv:" "$ho" | tail -1)
    fig=$(echo "$fig" | tr -s ' \t' ' ' | sed 's/^ //')
    local retx hretx
    retx=$(grep -oE '[0-9]+ retransmitted' "$OUT/logs/$name.seq-rxe" | awk '{s+=$1} END{print s+0}')
    hretx=$(grep -oE '[0-9]+ retransmitted' "$OUT/logs/$name.seq" | awk '{s+=$1} END{print s+0}')
    # a loss scenario must have lost frames (else it tested nothing)
    if [ "$loss" != 0 ] && { [ "$lost" = "?" ] || [ $((lost)) -eq 0 ]; }; then note="no frame was lost; "; hrc="${hrc:-0}+noloss"; fi
    # Hematite as the requester of SENDs / WRITEs under loss: go-back-N with its window sends at
    # most 4 request frames per frame of the messages (retransmitted <= 3/4 of all it sent;
    # docs/interop.md). (READ rows are left out: one lost response costs a whole READ request
    # again, and their request frames are few.)
    local hreq
    hreq=$(grep -oE 'requester[^:]*: [0-9]+ packets' "$OUT/logs/$name.seq" | grep -oE '[0-9]+ packets' | awk '{s+=$1} END{print s+0}')
    if [ "$dir" = req ] && [ "$loss" != 0 ] && [[ "$name" != *read* ]] && [ $((4 * hretx)) -gt $((3 * hreq)) ]; then
        note="${note}$hretx of Hematite's $hreq request frames retransmitted (more than 4x); "; hrc="${hrc:-0}+amplification"
    fi
    status_clear
    if [ "$hrc" = 0 ] && [ "$grc" = 0 ] && [ "$irc" = 0 ] && [ "$src" = 0 ]; then
        pass=$((pass + 1)); printf 'ok    %-24s %3ss  %s | %s | lost (tx+rx) %s | retransmitted: Hematite %s, rxe %s%s\n' "$name" $((SECONDS - t0)) "$fig" "${icrc##*: }" "$lost" "$hretx" "$retx" "$([ $calib = 1 ] && echo " | $note")"
        echo "| $name | $dir | pass$([ $calib = 1 ] && echo " (guest perftest's clock calibration failed; verdict from Hematite and the capture)") | $fig | ${icrc##*: } | $lost | ${seq##*: } ($hretx retransmitted) | ${peer##*: } ($retx retransmitted) |" >> "$MATRIX"
    else
        # The guest's wait loop answers within its own bound of guest time, so a command channel
        # that stays silent past it means the guest itself stopped running (a kernel stall of
        # the reference peer, seen once in CI on a loaded machine). Its kernel messages are
        # printed and kept, the VM is rebooted and the scenario runs once more; the rerun's
        # verdict counts, and the summary line says how many reruns there were.
        if grep -q "^vmctl: no answer within\|^vmctl: the guest's command channel closed" "$go" && [ "$REBOOTS" -lt "$MAX_REBOOTS" ]; then
            REBOOTS=$((REBOOTS + 1)); reruns+=("$name")
            printf 'RERUN %-24s %3ss  the guest stopped answering (host rc=%s; %s; sequence: %s)\n' "$name" $((SECONDS - t0)) "$hrc" "$icrc" "$seq"
            VMT=15 vm "cat /proc/uptime; ps -o pid,stat,time,args" > "$OUT/logs/$name.stalled-probe" 2>&1
            sed 's/^/   probe: /' "$OUT/logs/$name.stalled-probe" | tail -n 8
            sed '1,/^RXE-READY/d' "$CONSOLE" | tail -n 20 | sed 's/^/   guest console: /'
            for f in "$ho" "$go" "$OUT/logs/$name.seq" "$OUT/logs/$name.seq-rxe"; do mv -f "$f" "$f.stalled" 2>/dev/null; done
            mv -f "$pc" "$OUT/pcap/$name.stalled.pcap" 2>/dev/null
            echo "| $name | $dir | rerun (the guest stopped answering; logs *.stalled) | $fig | ${icrc##*: } | $lost | ${seq##*: } | ${peer##*: } |" >> "$MATRIX"
            boot_vm "$REBOOTS"
            echo "   VM rebooted: $(grep '^RXE-READY' "$CONSOLE")"
            [ "$MTU" = 4096 ] && VMT=10 vm "ip link set eth0 mtu 4200 && sleep 1" > /dev/null 2>&1
            scenario "$name" "$dir" "$loss" "$gcmd" -- "$@"
            return
        fi
        fail=$((fail + 1)); failed+=("$name")
        printf 'FAIL  %-24s %3ss  %shost rc=%s guest rc=%s; %s; sequence: %s; rxe: %s\n' "$name" $((SECONDS - t0)) "$note" "$hrc" "$grc" "$icrc" "$seq" "$peer"
        tail -n 4 "$ho" | sed 's/^/   host: /'; tail -n 4 "$go" | sed 's/^/   guest: /'
        sed '1,/^RXE-READY/d' "$CONSOLE" | tail -n 10 | sed 's/^/   guest console: /'
        echo "| $name | $dir | **FAIL** (${note}host $hrc, guest $grc) | $fig | ${icrc##*: } | $lost | ${seq##*: } | ${peer##*: } |" >> "$MATRIX"
    fi
}

# GID indices: rxe 1 = ::ffff:192.0.2.1 and Hematite 0 = ::ffff:192.0.2.2 (IPv4); rxe 0 and
# Hematite 1 are the IPv6 link-local GIDs. rxe gets -u 18 (a ~1 s ACK timeout: the simulated
# peer is slow).
GX=1; HX=0; MTU=1024
# pf NAME DIR LOSS TOOL ARGS...: a perftest pair (same arguments on both sides)
pf() {
    local name="$1" dir="$2" loss="$3" tool="$4"; shift 4
    local a="-m $MTU $*" hu=()
    # under loss Hematite's own ACK timeout repairs a lost retransmission or a lost last
    # packet; it runs in simulated time (~2.5 M cycles per wall second), so perftest's
    # default code 14 (16.8 M cycles) would cost ~7 s of wall time per such loss: code 10
    [ "$loss" != 0 ] && hu=(-u 10)
    if [ "$dir" = req ]; then
        scenario "${name}_req" req "$loss" "$tool -d rxe0 -x $GX -u 18 $a" -- "$tool" -d hematite0 -x $HX "${hu[@]}" -p "$HPORT" $a 127.0.0.1
    else
        scenario "${name}_resp" resp "$loss" "$tool -d rxe0 -x $GX -u 18 -p 18515 $a $GUESTFWD" -- "$tool" -d hematite0 -x $HX "${hu[@]}" -p "$RPORT" $a
    fi
}
pf2() { pf "$1" req "${@:2}"; pf "$1" resp "${@:2}"; }
# pp NAME DIR LOSS ARGS...: ibv_rc_pingpong, or PP_TOOL (ibv_uc_pingpong) (-c: the receiver
# checks the data)
pp() {
    local name="$1" dir="$2" loss="$3"; shift 3
    local mtu=$MTU a="-c $*" t="${PP_TOOL:-ibv_rc_pingpong}"
    if [ "$dir" = req ]; then
        scenario "${name}_req" req "$loss" "$t -d rxe0 -g $GX -m $mtu $a" -- "$t" -d hematite0 -g $HX -m $mtu -p "$HPORT" $a 127.0.0.1
    else
        scenario "${name}_resp" resp "$loss" "$t -d rxe0 -g $GX -m $mtu -p 18515 $a $GUESTFWD" -- "$t" -d hematite0 -g $HX -m $mtu -p "$RPORT" $a
    fi
}
pp2() { pp "$1" req "${@:2}"; pp "$1" resp "${@:2}"; }
# ii NAME DIR LOSS ARGS...: hm_imm_inv (immediate data and SEND with invalidate, both ways)
ii() {
    local name="$1" dir="$2" loss="$3"; shift 3
    local a="-m $MTU $*"
    if [ "$dir" = req ]; then
        scenario "${name}_req" req "$loss" "hm_imm_inv -d rxe0 -g $GX -u 18 --kernel-inv-flag $a" -- "$IMM" -d hematite0 -g $HX -u "$([ "$loss" != 0 ] && echo 10 || echo 14)" -p "$HPORT" $a 127.0.0.1
    else
        scenario "${name}_resp" resp "$loss" "hm_imm_inv -d rxe0 -g $GX -u 18 --kernel-inv-flag -p 18515 $a $GUESTFWD" -- "$IMM" -d hematite0 -g $HX -u "$([ "$loss" != 0 ] && echo 10 || echo 14)" -p "$RPORT" $a
    fi
}
ii2() { ii "$1" req "${@:2}"; ii "$1" resp "${@:2}"; }

echo "== scenarios"
scenarios() {
if [ $QUICK -eq 1 ]; then
    pp2 pingpong 0 -n 50
    PP_TOOL=ibv_uc_pingpong pp2 uc_pingpong 0 -n 50
    pf2 write_loss 0.01 ib_write_bw -s 65536 -n 50
    pf2 read_loss 0.01 ib_read_bw -s 65536 -n 50
else
    pp2 pingpong 0
    pp2 pingpong_4k_200 0 -s 4096 -n 200
    for s in 1 64 1024 4096 65536; do
        pf2 "write_bw_$s" 0 ib_write_bw -s $s -n 50
        pf2 "send_bw_$s" 0 ib_send_bw -s $s -n 50
        pf2 "read_bw_$s" 0 ib_read_bw -s $s -n 50
    done
    pf2 atomic_fadd 0 ib_atomic_bw -A FETCH_AND_ADD -n 50
    pf2 atomic_cas 0 ib_atomic_bw -A CMP_AND_SWAP -n 50
    for s in 1 64 4096 65536; do pf2 "send_lat_$s" 0 ib_send_lat -s $s -n 50; done
    pf write_bw_bidir req 0 ib_write_bw -b -s 65536 -n 50
    pf read_bw_bidir req 0 ib_read_bw -b -s 65536 -n 50
    ii2 imm_inv 0
    # UC: rdma-core's UC example and perftest over UC, both ways
    PP_TOOL=ibv_uc_pingpong pp2 uc_pingpong 0 -n 50
    PP_TOOL=ibv_uc_pingpong pp2 uc_pingpong_4k 0 -s 4096 -n 100
    pf2 uc_write_bw 0 ib_write_bw -c UC -s 65536 -n 50
    pf2 uc_send_bw 0 ib_send_bw -c UC -s 65536 -n 50
    # 1% of Hematite's frames lost on the wire
    pf2 write_loss 0.01 ib_write_bw -s 65536 -n 100
    pf2 send_loss 0.01 ib_send_bw -s 65536 -n 100
    pf2 read_loss 0.01 ib_read_bw -s 65536 -n 100
    # 3% lost, Hematite as the requester: ten 1 MiB WRITEs (issue 28: at most 4x the frames)
    pf write_loss3 req 0.03 ib_write_bw -s 1048576 -n 10
    # (no ibv_rc_pingpong with loss: it hard-codes ACK timeout code 14, ~7 s of simulated-device
    # wall time per frame whose repair needs the timer; docs/interop.md)
    ii imm_inv_loss req 0.01
    # RoCEv2 over IPv6 (link-local GIDs)
    GX=0; HX=1
    pp2 ipv6_pingpong 0 -s 4096 -n 50
    pf2 ipv6_send_bw 0 ib_send_bw -s 65536 -n 50
    pf2 ipv6_write_bw 0 ib_write_bw -s 65536 -n 50
    pf2 ipv6_read_bw 0 ib_read_bw -s 65536 -n 50
    ii ipv6_imm_inv req 0
    GX=1; HX=0
    # path MTU 4096 (rxe's eth0 at MTU 4200)
    if [ "$COUNTING" = 1 ] || VMT=10 vm "ip link set eth0 mtu 4200 && sleep 1 && ibv_devinfo -d rxe0 | grep active_mtu" > "$OUT/logs/mtu4200.txt" 2>&1; then
        MTU=4096
        pp2 mtu4096_pingpong 0 -s 16384 -n 50
        pf2 mtu4096_write_bw 0 ib_write_bw -s 65536 -n 50
        pf2 mtu4096_send_bw 0 ib_send_bw -s 65536 -n 50
        pf2 mtu4096_read_bw 0 ib_read_bw -s 65536 -n 50
        pf2 mtu4096_write_loss 0.01 ib_write_bw -s 65536 -n 100
        ii mtu4096_imm_inv req 0
        MTU=1024
    else
        fail=$((fail + 1)); failed+=("mtu4096 (eth0 MTU 4200 in the guest)"); cat "$OUT/logs/mtu4200.txt"
    fi
fi
}
COUNTING=1; scenarios; COUNTING=0
T_SCEN=$SECONDS; scenarios
status_clear

vm "rdma statistic show link rxe0/1" > "$OUT/logs/rxe-counters.txt" 2>&1
echo
[ "$KEEP" = 1 ] && echo "VM left running: python3 $HERE/vm/vmctl.py $VMD/ctl 'CMD'; stop: kill $QPID"
for f in "${failed[@]}"; do echo "FAILED: $f (logs: $OUT/logs/$f.*)"; done
rr=""; [ "${#reruns[@]}" -gt 0 ] && rr=", ${#reruns[@]} rerun after the guest stopped answering (${reruns[*]})"
echo "interop: $pass passed, $fail failed$rr in $((SECONDS - T_START)) s (matrix: $MATRIX, pcaps: $OUT/pcap)"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]

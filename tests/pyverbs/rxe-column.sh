#!/usr/bin/env bash
# rdma-core's pyverbs tests against Linux Soft-RoCE: the second column of docs/conformance.md.
# A long run (a TCG guest), not a suite step.
#
#   tests/pyverbs/rxe-column.sh [--out DIR] [--timeout SECS] [--hematite-log LOG]
#
# The guest is the interoperability tests' (tests/interop/vm/build-guest.sh: Debian 12's kernel
# with rdma_rxe, rxe0 on eth0). This machine's root file system is shared with it read-only over
# 9p (virtio), and the tests run chrooted into it: this machine's /usr/bin/python3 with Debian's
# python3-pyverbs, the rdma-core tests that package ships (unpacked by pyverbs.sh) and its rxe
# provider, against the guest kernel's rxe0 (both sides of every test on one device, as
# rdma-core runs them; rxe loops such traffic back inside the device). --timeout bounds the run
# (default 3600 s). Writes DIR/run_tests.log and DIR/summary.txt (default build/pyverbs-rxe);
# with --hematite-log (pyverbs.sh's run_tests.log of the same tests), DIR/conformance.md with
# both columns side by side (tests/pyverbs/conformance.py).
#
# Fails when the guest does not come up or the run does not finish; a test that fails or errors
# on Soft-RoCE is Soft-RoCE's result, recorded, not a failure of this script.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT" || exit 2
# shellcheck source=scripts/lib/opts.sh
. scripts/lib/opts.sh
# shellcheck source=tests/pyverbs/summary.sh
. tests/pyverbs/summary.sh
OUT="$ROOT/build/pyverbs-rxe"; TMO=3600; HLOG=""
hm_opts "[--out DIR] [--timeout SECS] [--hematite-log LOG]" --out=OUT --timeout=TMO --hematite-log=HLOG -- "$@"
[[ "$TMO" =~ ^[0-9]+$ ]] || { echo "bad --timeout: $TMO" >&2; exit 2; }
VMSTATE="${RXE_VM_STATE:-/tmp/hematite-rxe-vm}"
mkdir -p "$OUT"; log="$OUT/run_tests.log"

if ! dpkg-query -W -f '${Status}' python3-pyverbs 2>/dev/null | grep -q "ok installed"; then
    echo "== apt-get install python3-pyverbs"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-pyverbs > /dev/null || { echo "cannot install python3-pyverbs" >&2; exit 2; }
fi
ver=$(dpkg-query -W -f '${Version}' python3-pyverbs)
TESTS="$ROOT/build/rdma-core-tests-$ver"
[ -f "$TESTS/tests/run_tests.py" ] || { echo "$TESTS/tests/run_tests.py is missing: run tests/pyverbs/pyverbs.sh once (it unpacks the tests)" >&2; exit 2; }
[ -x /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so ] || [ -f /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so ] ||
    { echo "no rxe provider on this machine (apt-get install ibverbs-providers)" >&2; exit 2; }

echo "== the Soft-RoCE guest image"
bash tests/interop/vm/build-guest.sh --state "$VMSTATE" > "$OUT/vm-build.log" 2>&1 ||
    { tail -20 "$OUT/vm-build.log"; echo "rxe-column: the guest image could not be built"; exit 1; }
W="$VMSTATE/image"
VMD="$(mktemp -d /tmp/hm-pyverbs-rxe.XXXXXX)"
QPID=""
cleanup() { [ -n "$QPID" ] && { kill "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null; }; rm -rf "$VMD"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ACCEL=tcg; CPU=max
if [[ -r /dev/kvm && -w /dev/kvm ]] && [[ -d /sys/module/kvm_intel || -d /sys/module/kvm_amd ]]; then ACCEL=kvm; CPU=host,-arch-capabilities; fi
echo "== booting the guest ($ACCEL), this machine's / shared read-only"
T0=$SECONDS
qemu-system-x86_64 -accel "$ACCEL" -M pc -cpu "$CPU" -smp 1 -m 1536 -nodefaults -no-reboot \
    -display none -monitor none -kernel "$W/vmlinux" -initrd "$W/initramfs.cpio" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off hm.name=P hm.ip=192.0.2.1/24" \
    -serial "file:$VMD/console.log" \
    -chardev "socket,id=ctl,path=$VMD/ctl,server=on,wait=off" -serial chardev:ctl \
    -netdev "user,id=n0,restrict=on" -device "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01" \
    -fsdev "local,id=h0,path=/,security_model=none,readonly=on" -device "virtio-9p-pci,fsdev=h0,mount_tag=hostroot" \
    > "$VMD/qemu.log" 2>&1 &
QPID=$!
for _ in $(seq 1800); do grep -q "^RXE-READY" "$VMD/console.log" 2>/dev/null && break; kill -0 $QPID 2>/dev/null || break; sleep 0.1; done
grep -q "^RXE-READY" "$VMD/console.log" 2>/dev/null ||
    { tail -20 "$VMD/console.log" "$VMD/qemu.log" 2>/dev/null; echo "rxe-column: the guest did not come up within 180 s"; exit 1; }
ready=$(grep '^RXE-READY' "$VMD/console.log")
gidx=$(sed -nE 's/.* gid_index=([0-9]+).*/\1/p' <<< "$ready")
echo "   $ready (boot $((SECONDS - T0)) s)"
vm() { python3 tests/interop/vm/vmctl.py --timeout "${VMT:-60}" "$VMD/ctl" "$*"; }
# the host's root at /host, with the guest's /proc, /sys, /dev and a /tmp of its own
vm "mkdir -p /host && mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /host &&
    mount -t proc proc /host/proc && mount -o bind /sys /host/sys && mount -o bind /dev /host/dev &&
    mount -t tmpfs tmpfs /host/tmp && chroot /host /usr/bin/python3 -c 'import pyverbs; print(\"pyverbs\", pyverbs.__file__)'" \
    > "$OUT/guest-setup.log" 2>&1 || { cat "$OUT/guest-setup.log"; echo "rxe-column: sharing this machine's root with the guest failed"; exit 1; }
echo "   $(tail -1 "$OUT/guest-setup.log")"
echo "== rdma-core $ver tests/run_tests.py on the guest's rxe0 (GID $gidx, RoCE v2 IPv4), chrooted into this machine's /"
T1=$SECONDS
vm "rm -f /tmp/pv.out /tmp/pv.rc; ( timeout -s KILL $TMO chroot /host /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp PYTHONDONTWRITEBYTECODE=1 sh -c 'cd \"$TESTS\" && exec /usr/bin/python3 tests/run_tests.py -v --dev rxe0 --gid $gidx' > /tmp/pv.out 2>&1; echo \$? > /tmp/pv.rc ) &" > /dev/null
while :; do
    rc=$(VMT=30 vm "cat /tmp/pv.rc 2>/dev/null" 2>/dev/null | tr -d '\r\n ')
    [ -n "$rc" ] && break
    kill -0 $QPID 2>/dev/null || { echo "rxe-column: the guest stopped"; exit 1; }
    [ $((SECONDS - T1)) -gt $((TMO + 120)) ] && { echo "rxe-column: no result after $((SECONDS - T1)) s"; exit 1; }
    sleep 10
done
VMT=120 vm "cat /tmp/pv.out" > "$log" 2>&1
secs=$((SECONDS - T1))
pv_summary "$log" "rdma-core $ver tests/run_tests.py on Linux Soft-RoCE (rxe0 in the guest, kernel $(cat "$W/kver")): $(date -u +%F) at $(git rev-parse --short HEAD), ${secs} s ($ACCEL)" "$rc" "$OUT/summary.txt"
[ -n "$ran" ] || { echo "rxe-column: the log holds no summary (log: $log)"; exit 1; }
if [ -n "$HLOG" ]; then
    # each column's title: the first line of its summary (pyverbs.sh writes one beside its log)
    htitle=$(head -1 "$(dirname "$HLOG")/summary.txt" 2>/dev/null | sed 's/: *$//'); htitle=${htitle:-$HLOG}
    python3 tests/pyverbs/conformance.py "$HLOG" "$htitle" "$log" "$(head -1 "$OUT/summary.txt")" > "$OUT/conformance.md" ||
        { echo "rxe-column: no table"; exit 1; }
    echo "table with both columns: $OUT/conformance.md"
fi
echo "rxe-column: ok"

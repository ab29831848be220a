#!/usr/bin/env bash
# The .deb packages, from the packaged files alone: builds them (./hematite package, the test
# profile by default, as the suite), checks their control fields and contents, unpacks them
# into a scratch root (no dpkg -i: nothing is installed on the host) and runs ibv_devices,
# ibv_devinfo and an ibv_rc_pingpong pair through the packaged hematite-run, which must take
# the packaged hematite-sim, firmware image and provider (its --check says which files).
#
#   tests/pkg/check.sh [--profile release|test]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PROFILE=test
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--profile release|test]" --profile=PROFILE -- "$@"

OUT="$ROOT/build/pkg-$PROFILE"
./hematite package --profile "$PROFILE" --out "$OUT" || { echo "FAIL: ./hematite package"; exit 1; }

pass=0; fail=0
ok() { pass=$((pass + 1)); printf 'ok    %-28s %s\n' "$1" "${2:-}"; }
bad() { fail=$((fail + 1)); printf 'FAIL  %-28s %s\n' "$1" "$2"; }

SCRATCH="$(mktemp -d /tmp/hm-pkg.XXXXXX)"
STATE="$SCRATCH/state"
RUN="$SCRATCH/root/usr/bin/hematite-run"
trap '[ -x "$RUN" ] && env -u HEMATITE_SIM -u HEMATITE_FW -u HEMATITE_PROVIDER "$RUN" --state "$STATE" --stop >/dev/null 2>&1; rm -rf "$SCRATCH"' EXIT

# ---------------------------------------------------------------- control fields and contents
for pkg in hematite-verbs hematite-sim hematite-run hematite-doc; do
    deb=$(ls "$OUT"/${pkg}_*.deb 2>/dev/null | head -1)
    if [ -z "$deb" ]; then bad "$pkg" "no package in $OUT"; continue; fi
    name=$(dpkg-deb -f "$deb" Package); ver=$(dpkg-deb -f "$deb" Version); dep=$(dpkg-deb -f "$deb" Depends)
    files=$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '/$' | tr '\n' ' ')
    want=""
    case "$pkg" in
        hematite-verbs) want="./usr/lib/x86_64-linux-gnu/libibverbs/libhematite-rdmav34.so ./etc/libibverbs.d/hematite.driver" ;;
        hematite-sim) want="./usr/bin/hematite-sim ./usr/share/hematite/firmware.hex" ;;
        hematite-run) want="./usr/bin/hematite-run ./usr/share/doc/hematite-run/hematite-run.md ./lib/systemd/system/hematite-cards.service ./usr/share/doc/hematite-run/cards.conf.example ./usr/share/doc/hematite-run/cards.md" ;;
        hematite-doc) want="./usr/share/doc/hematite/README.md ./usr/share/doc/hematite/counters.md ./usr/share/doc/hematite/packages.md" ;;
    esac
    missing=""
    for f in $want; do [[ " $files " == *" $f "* ]] || missing="$missing $f"; done
    if [ "$name" = "$pkg" ] && [ -z "$missing" ]; then
        ok "$pkg" "$(basename "$deb"): version $ver, depends: ${dep:-none}; $(wc -w <<<"$files") files"
    else
        bad "$pkg" "Package '$name', missing:$missing"
    fi
    dpkg-deb -x "$deb" "$SCRATCH/root"
done
# hematite-run depends on hematite-sim and hematite-verbs of its own version (Cargo.toml writes
# the version out: this catches a version bump that forgot it)
rv=$(dpkg-deb -f "$OUT"/hematite-run_*.deb Version 2>/dev/null); rd=$(dpkg-deb -f "$OUT"/hematite-run_*.deb Depends 2>/dev/null)
[[ "$rd" == *"hematite-sim (= $rv)"* && "$rd" == *"hematite-verbs (= $rv)"* ]] &&
    ok "dependency versions" "hematite-run $rv needs hematite-sim and hematite-verbs $rv" ||
    bad "dependency versions" "hematite-run $rv: Depends: $rd"
drv=$(cat "$SCRATCH/root/etc/libibverbs.d/hematite.driver" 2>/dev/null)
[ "$drv" = "driver hematite" ] && ok "libibverbs config" "etc/libibverbs.d/hematite.driver: '$drv'" ||
    bad "libibverbs config" "hematite.driver holds '$drv'"
# the firmware image is the one the checkout built
cmp -s "$SCRATCH/root/usr/share/hematite/firmware.hex" build/fw/firmware.hex &&
    ok "firmware image" "usr/share/hematite/firmware.hex = build/fw/firmware.hex" ||
    bad "firmware image" "differs from build/fw/firmware.hex"

# ---------------------------------------------------------------- run from the scratch root
# (no HEMATITE_* variable: hematite-run finds the simulator beside it, the firmware in
# ../share/hematite and the provider in ../lib/x86_64-linux-gnu/libibverbs)
R() { env -u HEMATITE_SIM -u HEMATITE_FW -u HEMATITE_PROVIDER "$RUN" --state "$STATE" "$@"; }
R --check > "$SCRATCH/check.txt" 2>&1; crc=$?
from_pkg=1
for what in simulator firmware provider; do
    grep -E "(^|: )$what: ok" "$SCRATCH/check.txt" | grep -q "$SCRATCH/root/" || from_pkg=0
done
if [ $crc -eq 0 ] && [ $from_pkg -eq 1 ]; then
    ok "hematite-run --check" "simulator, firmware and provider from the scratch root"
else
    bad "hematite-run --check" "rc=$crc, packaged files used: $from_pkg"; sed 's/^/   /' "$SCRATCH/check.txt" | tail -20
fi
R -- ibv_devices > "$SCRATCH/devices.txt" 2>&1 && grep -q hematite0 "$SCRATCH/devices.txt" && grep -q hematite1 "$SCRATCH/devices.txt" &&
    ok ibv_devices "hematite0, hematite1" || { bad ibv_devices "$(tail -3 "$SCRATCH/devices.txt" | tr '\n' ' ')"; }
R --nic 0 -- ibv_devinfo -d hematite0 > "$SCRATCH/devinfo.txt" 2>&1 && grep -q "state:.*PORT_ACTIVE" "$SCRATCH/devinfo.txt" &&
    ok ibv_devinfo "hematite0: PORT_ACTIVE" || { bad ibv_devinfo "$(tail -3 "$SCRATCH/devinfo.txt" | tr '\n' ' ')"; }
( timeout -k 5 300 env -u HEMATITE_SIM -u HEMATITE_FW -u HEMATITE_PROVIDER "$RUN" --state "$STATE" --nic 0 -- \
    stdbuf -oL ibv_rc_pingpong -d hematite0 -g 0 -n 100 > "$SCRATCH/pp.server" 2>&1 ) &
spid=$!
for _ in $(seq 120); do grep -q "local address" "$SCRATCH/pp.server" 2>/dev/null && break; sleep 0.5; done
sleep 1
crc=1
for _ in 1 2 3; do
    timeout -k 5 300 env -u HEMATITE_SIM -u HEMATITE_FW -u HEMATITE_PROVIDER "$RUN" --state "$STATE" --nic 1 -- \
        ibv_rc_pingpong -d hematite1 -g 0 -n 100 127.0.0.1 > "$SCRATCH/pp.client" 2>&1
    crc=$?
    grep -qiE "couldn't connect|unable to connect" "$SCRATCH/pp.client" || break
    sleep 2
done
wait $spid; src=$?
if [ $src -eq 0 ] && [ $crc -eq 0 ] && grep -q "iters in" "$SCRATCH/pp.client"; then
    ok ibv_rc_pingpong "$(grep -h 'iters in' "$SCRATCH/pp.client")"
else
    bad ibv_rc_pingpong "server rc=$src client rc=$crc"; tail -4 "$SCRATCH/pp.server" "$SCRATCH/pp.client" | sed 's/^/   /'
fi

# ---------------------------------------------------------------- cards: the boot-time unit
# The unit file, checked by systemd itself (with ExecStart pointed at the unpacked binary,
# since nothing is installed): any warning fails it.
UNIT="$SCRATCH/root/lib/systemd/system/hematite-cards.service"
if command -v systemd-analyze > /dev/null; then
    mkdir -p "$SCRATCH/unit"
    sed "s|/usr/bin/hematite-run|$RUN|g" "$UNIT" > "$SCRATCH/unit/hematite-cards.service"
    v=$(timeout 60 systemd-analyze verify --man=no "$SCRATCH/unit/hematite-cards.service" 2>&1); vrc=$?
    [ $vrc -eq 0 ] && [ -z "$v" ] && ok "hematite-cards.service" "systemd-analyze verify: clean" ||
        bad "hematite-cards.service" "systemd-analyze verify rc=$vrc: $v"
else
    bad "hematite-cards.service" "systemd-analyze is missing (Debian's systemd package): the unit cannot be checked"
fi
# What the unit runs, on a stand-in sysfs with one function bound to vfio-pci (no card here):
# the packaged hematite-run publishes it, and the packaged provider, loaded by the packaged
# libibverbs config, lists it and then tries to open it through VFIO, which must fail with the
# provider's message, not hang or pretend (the address is one no host has).
CSTATE="$SCRATCH/cards"; FSYS="$SCRATCH/fakesys"; BDF=0000:fe:1f.7
mkdir -p "$FSYS/bus/pci/devices" "$FSYS/bus/pci/drivers/vfio-pci" "$FSYS/devices/pci0000:fe/$BDF"
printf '0x10ee\n' > "$FSYS/devices/pci0000:fe/$BDF/vendor"; printf '0x903f\n' > "$FSYS/devices/pci0000:fe/$BDF/device"
ln -s ../../../bus/pci/drivers/vfio-pci "$FSYS/devices/pci0000:fe/$BDF/driver"
ln -s "../../../devices/pci0000:fe/$BDF" "$FSYS/bus/pci/devices/$BDF"
printf 'function %s mac 02:48:4d:0c:00:01 ipv4 10.9.0.1\n' "$BDF" > "$SCRATCH/cards.conf"
C() { env -u HEMATITE_SIM -u HEMATITE_FW -u HEMATITE_PROVIDER HEMATITE_RUN_SYS_ROOT="$FSYS" "$RUN" --state "$CSTATE" "$@"; }
if C --cards --config "$SCRATCH/cards.conf" > "$SCRATCH/cards.txt" 2>&1 && grep -q "hematite0: vfio:$BDF,mac=02:48:4d:0c:00:01,ipv4=10.9.0.1" "$SCRATCH/cards.txt"; then
    ok "hematite-run --cards" "$(head -1 "$SCRATCH/cards.txt")"
else
    bad "hematite-run --cards" "$(tr '\n' ' ' < "$SCRATCH/cards.txt")"
fi
C -- ibv_devices > "$SCRATCH/cdev.txt" 2>&1 && grep -qE "hematite0\s+00484dfffe0c0001" "$SCRATCH/cdev.txt" &&
    ok "ibv_devices (card)" "hematite0 with the configured MAC's GUID" || bad "ibv_devices (card)" "$(tr '\n' ' ' < "$SCRATCH/cdev.txt")"
timeout 60 env -u HEMATITE_SIM -u HEMATITE_FW -u HEMATITE_PROVIDER "$RUN" --state "$CSTATE" -- ibv_devinfo -d hematite0 > "$SCRATCH/cinfo.txt" 2>&1; irc=$?
if [ $irc -ne 0 ] && [ $irc -ne 124 ] && grep -q "opening the PCI function $BDF through VFIO" "$SCRATCH/cinfo.txt"; then
    ok "ibv_devinfo (card)" "rc=$irc: $(grep -m1 'opening the PCI function' "$SCRATCH/cinfo.txt")"
else
    bad "ibv_devinfo (card)" "rc=$irc: $(tr '\n' ' ' < "$SCRATCH/cinfo.txt")"
fi
C --stop > /dev/null 2>&1 && [ ! -e "$CSTATE/cards" ] && ok "cards withdrawn" "--stop" || bad "cards withdrawn" "$CSTATE/cards remains"

echo "packages: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

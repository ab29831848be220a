#!/usr/bin/env bash
# Co-simulation speed of the Verilated NIC (issue 23, docs/sim-device.md "Co-simulation speed").
#
#   scripts/bench-sim.sh [--sim PATH] [--fw HEX] [--count N] [--size BYTES] [--idle-secs S] [--busy-only]
#
# * busy: `hematite-sim demo --count N --size BYTES` (default 300 x 64 KiB), whose line
#   `co-simulation speed while busy (RDMA WRITE phase, NIC a): C cycles/s ...; verified WRITE
#   payload M MB/s ...` gives the simulated cycles per second of wall time and the verified
#   payload rate;
# * idle: one `hematite-sim device` with nothing connected, past its idle threshold, its CPU
#   time over --idle-secs (default 10) from /proc/PID/stat, as a share of one core;
#   --busy-only skips it (the test suite prints the busy figure only: the idle part waits 40 s).
#
# Figures only: these machines are shared and noisy, so nothing here fails on an absolute
# time (scripts/sim-compare.sh sets two builds side by side in one run). The last line is
# `cycles/s busy: C`. Exit status: 0, or 1 when a run failed or printed no figure.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIM="$ROOT/target/release/hematite-sim"
FW="$ROOT/build/fw/firmware.hex"
COUNT=300
SIZE=65536
IDLE=10
BUSY_ONLY=0
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--sim PATH] [--fw HEX] [--count N] [--size BYTES] [--idle-secs S] [--busy-only]" \
    --sim=SIM --fw=FW --count=COUNT --size=SIZE --idle-secs=IDLE --busy-only=BUSY_ONLY=1 -- "$@"
[ -x "$SIM" ] || { echo "bench-sim: $SIM missing (cargo build --release -p hematite-sim)" >&2; exit 1; }
[ -f "$FW" ] || { echo "bench-sim: $FW missing (./hematite fw)" >&2; exit 1; }

DIR="$(mktemp -d /tmp/hm-bench-sim.XXXXXX)"
trap 'kill "$DEV" 2>/dev/null; rm -rf "$DIR"' EXIT
DEV=""

# ---- busy
"$SIM" demo --dir "$DIR/demo" --fw "$FW" --count "$COUNT" --size "$SIZE" > "$DIR/demo.log" 2>&1
rc=$?
line=$(grep -E '^.*co-simulation speed while busy' "$DIR/demo.log" | tail -1)
cps=$(sed -nE 's/.*NIC a\): ([0-9]+) cycles\/s.*/\1/p' <<<"$line")
mbs=$(sed -nE 's/.*verified WRITE payload ([0-9.]+) MB\/s.*/\1/p' <<<"$line")
if [ $rc -ne 0 ] || [ -z "$cps" ]; then
    echo "bench-sim: the demo failed (rc $rc) or printed no speed:"
    tail -n 15 "$DIR/demo.log" | sed 's/^/   /'
    exit 1
fi
echo "bench-sim: busy, hematite-sim demo --count $COUNT --size $SIZE: $cps cycles/s (NIC a, WRITE phase), verified WRITE payload $mbs MB/s of wall time"
if [ "$BUSY_ONLY" = 1 ]; then
    echo "cycles/s busy: $cps"
    exit 0
fi

# ---- idle: a device nobody talks to, measured once it went idle (2,000,000 cycles without
# activity: about 15 s at full speed)
"$SIM" device --socket "$DIR/nic.sock" --wire-local "unix:$DIR/w0" --wire-peer "unix:$DIR/w1" \
    --mac 02:48:4d:00:00:09 --ip 10.99.0.1 --fw "$FW" > "$DIR/dev.log" 2>&1 &
DEV=$!
ticks() { awk '{print $14 + $15}' "/proc/$DEV/stat"; }
hz=$(getconf CLK_TCK)
sleep 30
kill -0 "$DEV" 2>/dev/null || { echo "bench-sim: the idle device died:"; sed 's/^/   /' "$DIR/dev.log"; exit 1; }
t0=$(ticks)
sleep "$IDLE"
t1=$(ticks)
kill "$DEV"; wait "$DEV" 2>/dev/null; DEV=""
pct=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$IDLE" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }')
echo "bench-sim: idle device (nothing connected, measured 30 s after its start for $IDLE s): $pct % of a core"
echo "cycles/s busy: $cps"

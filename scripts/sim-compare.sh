#!/usr/bin/env bash
# Co-simulation speed side by side (issue 23): builds hematite-sim (release) and the firmware
# at an older commit in a scratch worktree, then runs `hematite-sim demo --count N --size B`
# with that build and with this tree's, alternately, ROUNDS times each, in one run on one
# machine, and prints the busy cycles/s of each and their ratio (medians).
#
#   scripts/sim-compare.sh [--base COMMIT] [--rounds R] [--count N] [--size B] [--verilator PATH]
#
# --base defaults to b5b5db3 (the commit before the speed work); --verilator (default
# /usr/bin/verilator, Debian's) is the one the base is built with. This tree's build must
# exist (./hematite bench-sim builds it). The base build lives in build/sim-compare/ and is
# reused while its commit is unchanged. Figures only: nothing here fails on a ratio.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE=b5b5db3
ROUNDS=3
COUNT=300
SIZE=65536
VL=/usr/bin/verilator
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--base COMMIT] [--rounds R] [--count N] [--size B] [--verilator PATH]" \
    --base=BASE --rounds=ROUNDS --count=COUNT --size=SIZE --verilator=VL -- "$@"
cd "$ROOT"
base=$(git rev-parse --verify "$BASE^{commit}") || { echo "sim-compare: unknown commit $BASE" >&2; exit 2; }
CUR_SIM="$ROOT/target/release/hematite-sim"
CUR_FW="$ROOT/build/fw/firmware.hex"
[ -x "$CUR_SIM" ] && [ -f "$CUR_FW" ] || { echo "sim-compare: build this tree first (./hematite bench-sim)" >&2; exit 2; }

WT="$ROOT/build/sim-compare/src"
if [ "$(git -C "$WT" rev-parse HEAD 2>/dev/null)" != "$base" ]; then
    git worktree remove --force "$WT" 2>/dev/null
    rm -rf "$WT"
    mkdir -p "$(dirname "$WT")"
    git worktree add -q --detach "$WT" "$base" || exit 2
fi
echo "== building the base ${base:0:7} (hematite-sim, release; firmware) with $VL"
(
    cd "$WT" || exit 1
    mkdir -p build/ext
    cp -n "$ROOT"/build/ext/* build/ext/ 2>/dev/null
    VERILATOR="$VL" CARGO_TARGET_DIR="$ROOT/build/sim-compare/target" \
        cargo build --release -q -p hematite-sim --bin hematite-sim || exit 1
    if [ ! -f build/fw/firmware.hex ]; then
        # (the worktree's own target/: its elf2hex reads the firmware from there)
        ./hematite fw >/dev/null || exit 1
    fi
) || { echo "sim-compare: the base did not build" >&2; exit 1; }
BASE_SIM="$ROOT/build/sim-compare/target/release/hematite-sim"
BASE_FW="$WT/build/fw/firmware.hex"

one() { # SIM FW -> cycles/s
    local d
    d=$(mktemp -d /tmp/hm-cmp.XXXXXX)
    "$1" demo --dir "$d" --fw "$2" --count "$COUNT" --size "$SIZE" 2>&1 |
        sed -nE 's/.*co-simulation speed while busy \(RDMA WRITE phase, NIC a\): ([0-9]+) cycles\/s.*/\1/p' | tail -1
    rm -rf "$d"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
: > /tmp/hm-cmp-base.$$; : > /tmp/hm-cmp-cur.$$
for r in $(seq 1 "$ROUNDS"); do
    b=$(one "$BASE_SIM" "$BASE_FW"); c=$(one "$CUR_SIM" "$CUR_FW")
    [ -n "$b" ] && [ -n "$c" ] || { echo "sim-compare: a demo printed no speed (base '$b', current '$c')" >&2; exit 1; }
    echo "round $r: base ${base:0:7} $b cycles/s, current $(git rev-parse --short HEAD) $c cycles/s"
    echo "$b" >> /tmp/hm-cmp-base.$$; echo "$c" >> /tmp/hm-cmp-cur.$$
done
mb=$(median < /tmp/hm-cmp-base.$$); mc=$(median < /tmp/hm-cmp-cur.$$)
rm -f /tmp/hm-cmp-base.$$ /tmp/hm-cmp-cur.$$
echo "sim-compare: busy cycles/s (median of $ROUNDS, demo --count $COUNT --size $SIZE): base ${base:0:7} $mb, current $(git rev-parse --short HEAD) $mc, ratio $(awk -v a="$mc" -v b="$mb" 'BEGIN { printf "%.2fx", a / b }')"

#!/usr/bin/env bash
# The verbs-call fuzzer (tests/verbs/hm_verbs_fuzz.c) over two simulated Hematite NICs.
#
#   tests/verbs/fuzz.sh [--count N] [--seed S] [--profile test|release] [--timeout SECS]
#                       [--only OP,OP] [--state DIR] [--no-build]
#
# Builds hematite-sim, the provider, hematite-run and the C programs (cargo profile --profile,
# default test; cargo rebuilds what is older than its sources),
# starts the two NICs with hematite-run (its own state directory unless --state), runs
# hm_verbs_fuzz --count N --seed S under a timeout (default: 120 s + 60 ms per call) and
# reports. The fuzzer's last line is `fuzz verbs: N cases, F findings`; this script prints
# that line last too, turning a crash (a signal) or a hang (the timeout) into a finding.
# Exit status: 0 when nothing was found, 1 on findings, 2 on a setup failure.
# The full output is in $OUT/fuzz.log (OUT defaults to build/verbs).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

COUNT=2000
SEED=""
PROFILE=test
TMO=""
ONLY=""
STATE=""
BUILD=1
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--count N] [--seed S] [--profile test|release] [--timeout SECS] [--only OP,OP] [--state DIR] [--no-build]" \
    --count=COUNT --seed=SEED --profile=PROFILE --timeout=TMO --only=ONLY --state=STATE --no-build=BUILD=0 -- "$@"
case "$PROFILE" in release) TDIR=target/release ;; test) TDIR=target/debug ;; *) echo "bad profile $PROFILE" >&2; exit 2 ;; esac
[ -n "$SEED" ] || SEED=$(( $(date +%s) % 1000000 ))
[ -n "$TMO" ] || TMO=$(( 120 + COUNT * 60 / 1000 ))

OUT="${OUT:-$ROOT/build/verbs}"
mkdir -p "$OUT"
LOG="$OUT/fuzz.log"
if [ $BUILD -eq 1 ]; then
    echo "== building the provider and hematite-run ($PROFILE profile) and the C verbs programs"
    # (always through cargo: a hematite-sim older than the RTL would fuzz another engine)
    cargo build -q --profile "$PROFILE" -p hematite-sim --bin hematite-sim -p hematite-verbs -p hematite-run || exit 2
    bash tests/verbs/build.sh "$OUT/bin" >/dev/null || exit 2
fi
[ -f build/fw/firmware.hex ] || { echo "build/fw/firmware.hex missing: ./hematite fw" >&2; exit 2; }

RUN="$ROOT/$TDIR/hematite-run"
export HEMATITE_SIM="$ROOT/$TDIR/hematite-sim"
export HEMATITE_PROVIDER="$ROOT/$TDIR/libhematite_verbs.so"
export HEMATITE_FW="$ROOT/build/fw/firmware.hex"
OWN_STATE=0
if [ -z "$STATE" ]; then
    STATE="$(mktemp -d /tmp/hm-fuzz.XXXXXX)"
    OWN_STATE=1
    # on a finding the NICs' logs and captures are kept in $OUT/fuzz-nics/ (for the diagnosis)
    trap '"$RUN" --state "$STATE" --stop >/dev/null 2>&1
          if grep -qE "^(FINDING|TIMEOUT)" "$LOG" 2>/dev/null || ! grep -q "^fuzz verbs: .*, 0 findings$" "$LOG" 2>/dev/null; then
              rm -rf "$OUT/fuzz-nics"; mkdir -p "$OUT/fuzz-nics"
              mv "$STATE"/nic*.log "$STATE"/nic*.pcap "$OUT/fuzz-nics/" 2>/dev/null
              echo "# the NICs'"'"' logs and captures: $OUT/fuzz-nics/"
          fi
          rm -rf "$STATE"' EXIT
fi

echo "== hm_verbs_fuzz --count $COUNT --seed $SEED (timeout ${TMO} s; log $LOG)"
args=(--count "$COUNT" --seed "$SEED")
[ -n "$ONLY" ] && args+=(--only "$ONLY")
t0=$(date +%s)
if [ -t 2 ]; then
    # on a terminal, a status line from the fuzzer's progress lines (every 250 cases): the
    # cases done and the time left at the rate so far
    timeout -k 10 "$TMO" "$RUN" --state "$STATE" -- "$OUT/bin/hm_verbs_fuzz" "${args[@]}" > "$LOG" 2>&1 &
    fz=$!
    while kill -0 "$fz" 2>/dev/null; do
        sleep 1
        d=$(grep -oE '^# [0-9]+ cases' "$LOG" 2>/dev/null | tail -1 | grep -oE '[0-9]+')
        el=$(( $(date +%s) - t0 ))
        left="?"; [ -n "$d" ] && [ "$d" -gt 0 ] && left="$(( el * (COUNT - d) / d )) s"
        printf '\r\033[Kfuzz verbs: %s/%s cases, %s s elapsed, about %s left' "${d:-0}" "$COUNT" "$el" "$left" >&2
    done
    wait "$fz"; rc=$?
    printf '\r\033[K' >&2
else
    timeout -k 10 "$TMO" "$RUN" --state "$STATE" -- "$OUT/bin/hm_verbs_fuzz" "${args[@]}" > "$LOG" 2>&1
    rc=$?
fi
t1=$(date +%s)
grep -E '^(FINDING|TIMEOUT)' "$LOG" | head -50
last=$(grep -E '^fuzz verbs: ' "$LOG" | tail -1)
n=$(sed -nE 's/^fuzz verbs: ([0-9]+) cases, ([0-9]+) findings$/\1/p' <<<"$last")
f=$(sed -nE 's/^fuzz verbs: ([0-9]+) cases, ([0-9]+) findings$/\2/p' <<<"$last")
# cases done so far (the fuzzer prints its progress every 250 cases)
done_n=$(grep -oE '^# [0-9]+ cases' "$LOG" | tail -1 | grep -oE '[0-9]+')
nf=$(grep -cE '^FINDING' "$LOG")
if [ $rc -eq 124 ] || [ $rc -eq 137 ] || { [ -z "$last" ] && grep -q '^TIMEOUT' "$LOG"; }; then
    # a hang: the fuzzer (or one verbs call, seen by its watchdog) did not finish in time
    echo "FINDING: HANG: $(grep -E '^TIMEOUT' "$LOG" | tail -1 || true) no result after ${TMO} s; last progress: $(grep -E '^# [0-9]+ cases' "$LOG" | tail -1)"
    echo "fuzz verbs: ${done_n:-0}+ cases, $(( nf + 1 )) findings"
    exit 1
fi
if [ -z "$last" ] && [ $rc -ge 128 ] && [ $rc -ne 255 ]; then
    echo "FINDING: CRASH: the fuzzer died of signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"
    tail -n 5 "$LOG" | sed 's/^/   /'
    echo "fuzz verbs: ${done_n:-0}+ cases, $(( nf + 1 )) findings"
    exit 1
fi
if [ -z "$last" ]; then
    echo "setup failed (rc=$rc):"; tail -n 15 "$LOG" | sed 's/^/   /'
    exit 2
fi
grep -E '^# per op' "$LOG"
echo "# seed $SEED, $((t1 - t0)) s wall (including the NICs' start)"
if [ "$rc" -eq 2 ] && [ "${f:-0}" -eq 0 ]; then
    echo "setup failed:"; tail -n 15 "$LOG" | sed 's/^/   /'
    echo "$last"
    exit 2
fi
echo "$last"
[ "${f:-1}" -eq 0 ] && [ $rc -eq 0 ]

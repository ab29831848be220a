#!/usr/bin/env bash
# Instructions per post_send and per polled completion in the provider and driver code,
# counted by valgrind's callgrind on bench/fastpath.c against two simulated NICs.
#
#   verbs-provider/bench/bench.sh [--sim-profile test|release]
#
# The provider is built in release (what users load); the simulated device runs in another
# process and is not counted. Counted: from the provider's post_send (poll_cq) op down,
# inclusive, minus the simulated backend's transport of the doorbell write and of the WQE
# push (the `<Arc<T> as Device>::write32` and `::push64` calls: a message on the device socket
# here; on hardware a single MMIO store, and one 64-byte write-combined store). Two modes: one WR per ibv_post_send and one completion per ibv_poll_cq
# ("single"), and chains of 16 WRs / up to 16 completions per call ("chain").
# Ceilings: see the end of this script; exceeding one fails the run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SIMP=test
[ "${1:-}" = "--sim-profile" ] && SIMP="$2"
case "$SIMP" in release) SDIR=target/release ;; *) SDIR=target/debug ;; esac
command -v valgrind >/dev/null || { echo "bench: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

cargo build -q --release -p hematite-verbs -p hematite-run
cargo build -q --profile "$SIMP" -p hematite-sim --bin hematite-sim
OUT="$ROOT/build/verbs-bench"
mkdir -p "$OUT"
gcc -O2 -g -Wall -Wextra -Werror -o "$OUT/fastpath" verbs-provider/bench/fastpath.c -libverbs

export HEMATITE_SIM="$ROOT/$SDIR/hematite-sim" HEMATITE_PROVIDER="$ROOT/target/release/libhematite_verbs.so"
export HEMATITE_FW="$ROOT/build/fw/firmware.hex"
# no sleeping inside an empty poll: the benchmark waits for the device itself
export HM_POLL_BACKOFF_US=0
RUN="$ROOT/target/release/hematite-run"
STATE="$(mktemp -d /tmp/hm-bench.XXXXXX)"
trap '"$RUN" --state "$STATE" --stop >/dev/null 2>&1; rm -rf "$STATE"' EXIT

declare -A IR
for mode in single chain; do
    for op in post_send poll_cq; do
        f="$OUT/callgrind.$op.$mode"
        "$RUN" --state "$STATE" --no-preload -- valgrind --tool=callgrind --callgrind-out-file="$f" \
            --collect-atstart=no --toggle-collect="hm_$op" "$OUT/fastpath" "$mode" > "$OUT/run.$op.$mode.txt" 2>&1 ||
            { cat "$OUT/run.$op.$mode.txt"; echo "bench: fastpath failed"; exit 1; }
        line=$(grep -h '^mode=' "$OUT/run.$op.$mode.txt")
        total=$(grep -h "Collected :" "$OUT/run.$op.$mode.txt" | awk '{print $4}')
        ann=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null || true)
        db=$(grep -F 'as hostdrv::device::Device>::write32 [' <<<"$ann" | grep -F 'Arc<T>' | head -1 | awk '{gsub(",","",$1); print $1}' || true)
        pu=$(grep -F 'as hostdrv::device::Device>::push64 [' <<<"$ann" | grep -F 'Arc<T>' | head -1 | awk '{gsub(",","",$1); print $1}' || true)
        db=$(( ${db:-0} + ${pu:-0} ))
        n=$(sed -E 's/.* posts=([0-9]+).*/\1/' <<<"$line")
        [ "$op" = poll_cq ] && n=$(sed -E 's/.* polls=([0-9]+).*/\1/' <<<"$line")
        calls=$(sed -E 's/.* post_calls=([0-9]+).*/\1/' <<<"$line")
        [ "$op" = poll_cq ] && calls=$(sed -E 's/.* poll_calls=([0-9]+).*/\1/' <<<"$line")
        empty=$(sed -E 's/.* empty_polls=([0-9]+).*/\1/' <<<"$line")
        IR[$op.$mode]=$(( (total - db) / n ))
        printf '%-9s %-6s %6d ops in %5d calls: %9d instr counted, %8d of them the doorbell and push transport (excluded) -> %4d instr/op%s\n' \
            "$op" "$mode" "$n" "$calls" "$total" "$db" "${IR[$op.$mode]}" \
            "$([ "$op" = poll_cq ] && echo " ($empty empty polls)")"
    done
done
echo
# Ceilings, asserted (the run fails when one is exceeded). Chained mode: the issue-6 targets
# (150 / 100) or the figures of 2026-12-01 (105 / 82) + 10 %, whichever is lower. Single mode
# has not reached the issue-6 targets (182 / 141 on 2026-12-01, docs/verbs-provider.md): its
# ceilings are those figures + 10 %, a guard against regressions, not a target met. The
# completion ceilings went from 155 / 90 to 162 / 94 on 2026-12-04: a completion now decides
# whether it is returned (RESET and destroy clean a QP's completions; 150 / 85 -> 157 / 89).
# Single post_send went from 200 to 240 on 2026-12-04: a WR posted alone is also pushed
# through the MMIO path (the fit check and the push call: 182 -> 218; the push's transport is
# excluded like the doorbell's).
declare -A CEIL=([post_send.chain]=115 [poll_cq.chain]=94 [post_send.single]=240 [poll_cq.single]=162)
rc=0
for mode in single chain; do
    for op in post_send poll_cq; do
        v=${IR[$op.$mode]}; c=${CEIL[$op.$mode]}
        if [ "$v" -le "$c" ]; then verdict=ok; else verdict=EXCEEDED; rc=1; fi
        printf '%-6s %-9s %4d instr per %-10s ceiling %4d: %s\n' "$mode" "$op" "$v" \
            "$([ "$op" = poll_cq ] && echo completion || echo WR)" "$c" "$verdict"
    done
done
[ "$rc" = 0 ] && echo "bench-verbs: every ceiling held" || echo "bench-verbs: a ceiling was exceeded"
exit "$rc"

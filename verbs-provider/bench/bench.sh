#!/usr/bin/env bash
# Instructions per post_send and per polled completion in the provider and driver code,
# counted by valgrind's callgrind on bench/fastpath.c against two simulated NICs.
#
#   verbs-provider/bench/bench.sh [--sim-profile test|release]
#
# The provider is built in release (what users load); the simulated device runs in another
# process and is not counted. Counted: from the provider's post_send (poll_cq) op down,
# inclusive, minus the simulated backend's transport of the doorbell write (the
# `<Arc<T> as Device>::write32` call: a message on the device socket here, a single MMIO store
# on hardware). Two modes: one WR per ibv_post_send and one completion per ibv_poll_cq
# ("single"), and chains of 16 WRs / up to 16 completions per call ("chain").
# Targets (issue 6): <= 150 instructions per post_send, <= 100 per polled completion.
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
        db=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null | grep -F 'as hostdrv::device::Device>::write32 [' | grep -F 'Arc<T>' | head -1 | awk '{gsub(",","",$1); print $1}' || true)
        db=${db:-0}
        n=$(sed -E 's/.* posts=([0-9]+).*/\1/' <<<"$line")
        [ "$op" = poll_cq ] && n=$(sed -E 's/.* polls=([0-9]+).*/\1/' <<<"$line")
        calls=$(sed -E 's/.* post_calls=([0-9]+).*/\1/' <<<"$line")
        [ "$op" = poll_cq ] && calls=$(sed -E 's/.* poll_calls=([0-9]+).*/\1/' <<<"$line")
        empty=$(sed -E 's/.* empty_polls=([0-9]+).*/\1/' <<<"$line")
        IR[$op.$mode]=$(( (total - db) / n ))
        printf '%-9s %-6s %6d ops in %5d calls: %9d instr counted, %8d of them the doorbell transport (excluded) -> %4d instr/op%s\n' \
            "$op" "$mode" "$n" "$calls" "$total" "$db" "${IR[$op.$mode]}" \
            "$([ "$op" = poll_cq ] && echo " ($empty empty polls)")"
    done
done
echo
for mode in single chain; do
    p=${IR[post_send.$mode]}; q=${IR[poll_cq.$mode]}
    printf '%-6s post_send %4d instr (target 150: %s, %.2fx), polled completion %4d instr (target 100: %s, %.2fx)\n' "$mode" \
        "$p" "$([ "$p" -le 150 ] && echo met || echo missed)" "$(awk -v x="$p" 'BEGIN{print x/150}')" \
        "$q" "$([ "$q" -le 100 ] && echo met || echo missed)" "$(awk -v x="$q" 'BEGIN{print x/100}')"
done

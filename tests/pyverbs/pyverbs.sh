#!/usr/bin/env bash
# rdma-core's own Python test suite (pyverbs, tests/run_tests.py) against simulated Hematite NIC 0.
# A long run (about 4 min of tests on 2 cores), not a suite step: it needs rdma-core's test
# sources, which no package registry carries (Debian ships the pyverbs module, not its tests).
#
#   tests/pyverbs/pyverbs.sh [--profile release|test] [--src DIR] [--out DIR]
#
#   --src  an rdma-core checkout at the release of the installed python3-pyverbs (Debian 12:
#          v44.0); without it, that tag is cloned from GitHub into build/rdma-core-<tag>
#   --out  where the log, the summary and conformance.md (a row per test: pass, skip with
#          rdma-core's reason, FAIL, ERROR; docs/conformance.md is the last recorded one) go
#          (default build/pyverbs)
#
# Installs python3-pyverbs (apt) when missing; runs as root so that the tests, which read
# /sys/class/infiniband themselves, see the NICs (hematite-run's overlay). Fails when a test
# fails or errors, or when the run does not finish; every skipped test states its reason
# (rdma-core's skip messages: a feature the device lacks, another vendor's device), and the
# reasons are listed with their counts. docs/verbs-provider.md records the last run.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT" || exit 2
# shellcheck source=scripts/lib/opts.sh
. scripts/lib/opts.sh
# shellcheck source=scripts/lib/simrun.sh
. scripts/lib/simrun.sh
PROFILE=release; SRC=""; OUT="$ROOT/build/pyverbs"
hm_opts "[--profile release|test] [--src DIR] [--out DIR]" --profile=PROFILE --src=SRC --out=OUT -- "$@"
case "$PROFILE" in release|test) ;; *) echo "bad profile: $PROFILE" >&2; exit 2 ;; esac

if ! dpkg-query -W -f '${Status}' python3-pyverbs 2>/dev/null | grep -q "ok installed"; then
    echo "== apt-get install python3-pyverbs"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-pyverbs > /dev/null || { echo "cannot install python3-pyverbs" >&2; exit 2; }
fi
ver=$(dpkg-query -W -f '${Version}' python3-pyverbs); tag="v${ver%%-*}"
if [ -z "$SRC" ]; then
    SRC="$ROOT/build/rdma-core-$tag"
    if [ ! -f "$SRC/tests/run_tests.py" ]; then
        echo "== git clone rdma-core $tag (its tests/)"
        rm -rf "$SRC"
        git clone -q --depth 1 --branch "$tag" https://github.com/linux-rdma/rdma-core "$SRC" || { echo "cannot clone rdma-core $tag" >&2; exit 2; }
    fi
fi
[ -f "$SRC/tests/run_tests.py" ] || { echo "$SRC/tests/run_tests.py is missing" >&2; exit 2; }

hm_sim_build "$PROFILE" || exit $?
STATE="$(mktemp -d /tmp/hm-pyverbs.XXXXXX)"
trap '"$RUN" --state "$STATE" --stop >/dev/null 2>&1; rm -rf "$STATE"' EXIT
mkdir -p "$OUT"; log="$OUT/run_tests.log"

echo "== rdma-core $tag tests/run_tests.py on hematite0 (GID 0, RoCE v2)"
t0=$SECONDS
(cd "$SRC" && timeout -k 10 1800 "$RUN" --state "$STATE" --nic 0 -- /usr/bin/python3 tests/run_tests.py -v --dev hematite0 --gid 0) > "$log" 2>&1
rc=$?
secs=$((SECONDS - t0))
ran=$(sed -nE 's/^Ran ([0-9]+) tests? in .*/\1/p' "$log" | tail -1)
last=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
skipped=$(grep -oE 'skipped=[0-9]+' <<< "$last" | cut -d= -f2); skipped=${skipped:-0}
failures=$(grep -oE 'failures=[0-9]+' <<< "$last" | cut -d= -f2); failures=${failures:-0}
errors=$(grep -oE 'errors=[0-9]+' <<< "$last" | cut -d= -f2); errors=${errors:-0}
{
    echo "rdma-core $tag tests/run_tests.py on hematite0: $(date -u +%F) at $(git rev-parse --short HEAD), $PROFILE profile, ${secs} s"
    echo "ran ${ran:-?}: passed $(( ${ran:-0} - skipped - failures - errors )), skipped $skipped, failures $failures, errors $errors (exit $rc)"
    echo "skip reasons (count):"
    grep -oE "skipped ['\"].*['\"]$" "$log" | sed -E "s/^skipped ['\"](.*)['\"]$/\1/" | sort | uniq -c | sort -rn | sed 's/^/  /'
    echo "not passed:"
    grep -E '^(FAIL|ERROR): ' "$log" | sed 's/^/  /'
} | tee "$OUT/summary.txt"
python3 tests/pyverbs/conformance.py "$log" "rdma-core $tag, $(date -u +%F) at $(git rev-parse --short HEAD), $PROFILE profile" > "$OUT/conformance.md" ||
    echo "no per-test table: the log holds no results"
if [ $rc -eq 0 ] && [ -n "$ran" ] && [ "$failures" = 0 ] && [ "$errors" = 0 ] && [[ "$last" == OK* ]]; then
    echo "pyverbs: ok"
    exit 0
fi
echo "pyverbs: FAILED (log: $log)"
exit 1

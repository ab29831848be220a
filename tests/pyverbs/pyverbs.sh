#!/usr/bin/env bash
# rdma-core's own Python test suite (pyverbs, tests/run_tests.py) against simulated Hematite NIC 0.
# The whole run (about 3 min on 2 cores) is a long run, not a suite step; the suite runs the
# subset in tests/pyverbs/subset.txt (--subset).
#
#   tests/pyverbs/pyverbs.sh [--profile release|test] [--src DIR] [--subset FILE] [--min-pass N] [--out DIR]
#
#   --src      an rdma-core checkout (DIR/tests/run_tests.py) to take the tests from; without
#              it, the copy Debian's python3-pyverbs ships (/usr/share/doc/rdma-core/tests, the
#              release of the installed module: 44.0 on Debian 12), unpacked into
#              build/rdma-core-tests-<version> (from the package file itself, apt-get download,
#              where the system was installed without /usr/share/doc)
#   --subset   run only the tests FILE names (one unittest id per line, # comments): every one
#              must pass, a skip is a failure
#   --min-pass fail when fewer than N tests pass (the whole run: the count recorded in
#              docs/conformance.md, so that a lost pass is caught)
#   --out      where the log, the summary and conformance.md (a row per test: pass, skip with
#              rdma-core's reason, FAIL, ERROR; docs/conformance.md is the last recorded whole
#              run) go (default build/pyverbs)
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
# shellcheck source=tests/pyverbs/summary.sh
. tests/pyverbs/summary.sh
PROFILE=release; SRC=""; OUT="$ROOT/build/pyverbs"; SUBSET=""; MINPASS=0
hm_opts "[--profile release|test] [--src DIR] [--subset FILE] [--min-pass N] [--out DIR]" \
    --profile=PROFILE --src=SRC --subset=SUBSET --min-pass=MINPASS --out=OUT -- "$@"
case "$PROFILE" in release|test) ;; *) echo "bad profile: $PROFILE" >&2; exit 2 ;; esac
[[ "$MINPASS" =~ ^[0-9]+$ ]] || { echo "bad --min-pass: $MINPASS" >&2; exit 2; }

if ! dpkg-query -W -f '${Status}' python3-pyverbs 2>/dev/null | grep -q "ok installed"; then
    echo "== apt-get install python3-pyverbs"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-pyverbs > /dev/null || { echo "cannot install python3-pyverbs" >&2; exit 2; }
fi
ver=$(dpkg-query -W -f '${Version}' python3-pyverbs); tag="v${ver%%-*}"
if [ -z "$SRC" ]; then
    # the tests as the package ships them (some files gzip-compressed), unpacked once
    SRC="$ROOT/build/rdma-core-tests-$ver"
    if [ ! -f "$SRC/tests/run_tests.py" ]; then
        from=/usr/share/doc/rdma-core/tests
        tmp="$(mktemp -d /tmp/hm-pyverbs-src.XXXXXX)"
        if [ ! -f "$from/run_tests.py" ]; then
            echo "== $from is not installed (no /usr/share/doc): apt-get download python3-pyverbs=$ver"
            (cd "$tmp" && apt-get download "python3-pyverbs=$ver" > /dev/null 2>&1) ||
                { apt-get update -qq && (cd "$tmp" && apt-get download "python3-pyverbs=$ver" > /dev/null); } ||
                { echo "cannot download python3-pyverbs=$ver" >&2; rm -rf "$tmp"; exit 2; }
            dpkg -x "$tmp"/python3-pyverbs_*.deb "$tmp/x" || { echo "cannot unpack python3-pyverbs" >&2; rm -rf "$tmp"; exit 2; }
            from="$tmp/x/usr/share/doc/rdma-core/tests"
        fi
        [ -f "$from/run_tests.py" ] || { echo "python3-pyverbs $ver ships no tests/run_tests.py" >&2; rm -rf "$tmp"; exit 2; }
        rm -rf "$SRC.new"; mkdir -p "$SRC.new/tests"
        cp -r "$from"/. "$SRC.new/tests/" && find "$SRC.new/tests" -name '*.gz' -exec gunzip -f {} + ||
            { echo "cannot unpack the tests" >&2; rm -rf "$tmp" "$SRC.new"; exit 2; }
        rm -rf "$SRC"; mv "$SRC.new" "$SRC"; rm -rf "$tmp"
        echo "== rdma-core tests of python3-pyverbs $ver in $SRC/tests"
    fi
fi
[ -f "$SRC/tests/run_tests.py" ] || { echo "$SRC/tests/run_tests.py is missing" >&2; exit 2; }
names=()
if [ -n "$SUBSET" ]; then
    [ -f "$SUBSET" ] || { echo "no subset file $SUBSET" >&2; exit 2; }
    mapfile -t names < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$SUBSET" | grep -v '^$')
    [ ${#names[@]} -gt 0 ] || { echo "$SUBSET names no test" >&2; exit 2; }
fi

hm_sim_build "$PROFILE" || exit $?
STATE="$(mktemp -d /tmp/hm-pyverbs.XXXXXX)"
trap '"$RUN" --state "$STATE" --stop >/dev/null 2>&1; rm -rf "$STATE"' EXIT
mkdir -p "$OUT"; log="$OUT/run_tests.log"

what="tests/run_tests.py"; [ -n "$SUBSET" ] && what="$what, the ${#names[@]} tests of ${SUBSET#"$ROOT"/}"
echo "== rdma-core $tag $what on hematite0 (GID 0, RoCE v2)"
t0=$SECONDS
(cd "$SRC" && timeout -k 10 1800 "$RUN" --state "$STATE" --nic 0 -- /usr/bin/python3 tests/run_tests.py -v --dev hematite0 --gid 0 "${names[@]}") > "$log" 2>&1
rc=$?
secs=$((SECONDS - t0))
pv_summary "$log" "rdma-core $tag $what on hematite0: $(date -u +%F) at $(git rev-parse --short HEAD), $PROFILE profile, ${secs} s" "$rc" "$OUT/summary.txt"
python3 tests/pyverbs/conformance.py "$log" "rdma-core $tag, $(date -u +%F) at $(git rev-parse --short HEAD), $PROFILE profile" > "$OUT/conformance.md" ||
    echo "no per-test table: the log holds no results"
ok=1
[ $rc -eq 0 ] && [ -n "$ran" ] && [ "$failures" = 0 ] && [ "$errors" = 0 ] && [[ "$last" == OK* ]] || ok=0
if [ -n "$SUBSET" ] && { [ "${ran:-0}" != ${#names[@]} ] || [ "$passed" != ${#names[@]} ]; }; then
    echo "pyverbs: the subset names ${#names[@]} tests: ran ${ran:-0}, passed $passed (a skip in the subset is a failure)"
    ok=0
fi
if [ "$passed" -lt "$MINPASS" ]; then
    echo "pyverbs: $passed passed, fewer than --min-pass $MINPASS"
    ok=0
fi
if [ $ok = 1 ]; then
    echo "pyverbs: ok ($passed passed)"
    exit 0
fi
echo "pyverbs: FAILED (log: $log)"
exit 1

# Sourced by tests/pyverbs/pyverbs.sh and rxe-column.sh: the summary of an rdma-core
# tests/run_tests.py -v log.
#
#   pv_summary LOG HEADER RC OUTFILE
#
# Sets ran (empty when the log has no "Ran N tests" line), last (the final OK / FAILED line),
# skipped, failures, errors and passed, and writes to stdout and OUTFILE: HEADER, the counts,
# the skip reasons with their counts and the tests that failed or errored.
pv_summary() {
    local log=$1 header=$2 rc=$3 out=$4
    ran=$(sed -nE 's/^Ran ([0-9]+) tests? in .*/\1/p' "$log" | tail -1)
    last=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
    # (anchored: unittest also prints "expected failures=N")
    _pv_count() { local v; v=$(grep -oE "(\\(|, )$1=[0-9]+" <<< "$last" | head -1 | cut -d= -f2); echo "${v:-0}"; }
    skipped=$(_pv_count skipped); failures=$(_pv_count failures); errors=$(_pv_count errors)
    passed=$(( ${ran:-0} - skipped - failures - errors ))
    {
        echo "$header"
        echo "ran ${ran:-?}: passed $passed, skipped $skipped, failures $failures, errors $errors (exit $rc)"
        echo "skip reasons (count):"
        grep -oE "skipped ['\"].*['\"]$" "$log" | sed -E "s/^skipped ['\"](.*)['\"]$/\1/" | sort | uniq -c | sort -rn | sed 's/^/  /'
        echo "not passed:"
        grep -E '^(FAIL|ERROR): ' "$log" | sed 's/^/  /'
    } | tee "$out"
}

#!/usr/bin/env bash
# Tests of scripts/lib/opts.sh (a step of ./hematite test): values, flags, values with
# spaces, an unknown option and an option without its value (both: usage, status 2).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fails=0
check() {
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', want '$3'"; fails=$((fails + 1)); fi
}
run() {
    bash -c "source '$HERE/opts.sh'; A=1; B=x; F=0; hm_opts '[--a N] [--b S] [--f]' --a=A --b=B --f=F=1 -- \"\$@\"; echo \"\$A|\$B|\$F\"" opts "$@" 2>/tmp/opts_test.$$
}
check "defaults" "$(run)" "1|x|0"
check "values and a flag" "$(run --a 7 --f --b 'y z')" "7|y z|1"
check "the last value wins" "$(run --a 1 --a 2)" "2|x|0"
out="$(run --bogus)"; rc=$?
check "unknown option: status" "$rc" "2"
check "unknown option: message" "$(head -1 /tmp/opts_test.$$)" "opts: unknown option --bogus"
check "unknown option: usage" "$(tail -1 /tmp/opts_test.$$)" "usage: opts [--a N] [--b S] [--f]"
check "unknown option: nothing printed" "$out" ""
out="$(run --f --a)"; rc=$?
check "missing value: status" "$rc" "2"
check "missing value: message" "$(head -1 /tmp/opts_test.$$)" "opts: --a needs a value"
rm -f /tmp/opts_test.$$
if [ "$fails" -gt 0 ]; then echo "opts: $fails failed"; exit 1; fi
echo "opts: all passed"

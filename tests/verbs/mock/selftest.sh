#!/bin/sh
# Self-test of the verbs test programs against mockverbs (no RDMA device
# needed).  This checks the tests, not a provider: mockverbs implements the
# behaviour the tests expect from a kernel-backed provider.
#   tests/verbs/mock/selftest.sh [WORKDIR]     (default: a fresh mktemp -d)
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
w=${1:-$(mktemp -d)}
mkdir -p "$w"
cf="-O2 -g -Wall -Wextra -Werror -std=gnu11"
gcc -shared -fPIC -O2 -g -Wall -Wextra -o "$w/libmockverbs.so" "$here/mockverbs.c" -lpthread || exit 1
for p in hm_nccl_replay hm_verbs_errors hm_verbs_ops; do
	gcc $cf -o "$w/$p" "$src/$p.c" -L"$w" -lmockverbs -Wl,-rpath,"$w" -lpthread || exit 1
done
rm -f /tmp/mockverbs-mock0.lock /tmp/mockverbs-mock1.lock

pass=0
fail=0
port=19600
# pair NAME PROG ARGS... : server on mock0, client on mock1, both must exit 0
pair() {
	name=$1 prog=$2
	shift 2
	port=$((port + 1))
	timeout 300 "$w/$prog" -d mock0 -p $port "$@" >"$w/$name.srv" 2>&1 &
	spid=$!
	timeout 300 "$w/$prog" -d mock1 -p $port "$@" 127.0.0.1 >"$w/$name.cli" 2>&1
	crc=$?
	wait $spid
	src_rc=$?
	if [ $crc -eq 0 ] && [ $src_rc -eq 0 ]; then
		pass=$((pass + 1))
		echo "ok $name ($(tail -1 "$w/$name.cli"))"
	else
		fail=$((fail + 1))
		echo "FAIL $name: server rc=$src_rc client rc=$crc (logs $w/$name.srv $w/$name.cli)"
		grep -h -E '^(FAIL|TIMEOUT)' "$w/$name.srv" "$w/$name.cli" | head -10
	fi
}

if timeout 120 "$w/hm_verbs_errors" -d mock0 -t 20 >"$w/errors.log" 2>&1; then
	pass=$((pass + 1)); echo "ok errors ($(tail -1 "$w/errors.log"))"
else
	fail=$((fail + 1)); echo "FAIL errors (log $w/errors.log)"
	grep -E '^(FAIL|TIMEOUT)' "$w/errors.log" | head -10
fi
pair replay_default hm_nccl_replay -t 30
pair replay_events hm_nccl_replay -t 30 -e -n 40
pair replay_inline_tc hm_nccl_replay -t 30 -I -T 106 -q 1 -n 35
pair replay_small hm_nccl_replay -t 30 -s 3 -n 70 -q 8
pair replay_zero hm_nccl_replay -t 30 -s 0 -n 20
pair replay_long hm_nccl_replay -t 30 -n 400 -s 4096 -q 16
pair ops_default hm_verbs_ops -t 30
pair ops_subset hm_verbs_ops -t 30 -S 7,100 -m inline,cas,bad_rkey,send
echo "selftest: $pass passed, $fail failed"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# Acceptance of the verbs provider: stock rdma-core tools, perftest and our own verbs programs
# run unchanged on two simulated Hematite NICs joined by the datagram wire, through
# hematite-run. Every run checks exit codes and parses the figures the tools print.
#
#   tests/verbs/acceptance.sh [--profile release|test] [--quick] [--only NAME[,NAME...]]
#
# Expects the firmware image (build/fw/firmware.hex); builds hematite-sim, the provider,
# hematite-run and the C programs in the chosen cargo profile (default: test, as the suite).
# Prints one line per scenario (ok / FAIL) with its figures, then `verbs: N passed, M failed`.
# Figures also go to $OUT/figures.txt (OUT defaults to build/verbs).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

PROFILE=test
QUICK=0
ONLY=""
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--profile release|test] [--quick] [--only a,b]" \
    --profile=PROFILE --quick=QUICK=1 --only=ONLY -- "$@"
case "$PROFILE" in release) TDIR=target/release ;; test) TDIR=target/debug ;; *) echo "bad profile" >&2; exit 2 ;; esac

OUT="${OUT:-$ROOT/build/verbs}"
mkdir -p "$OUT"
: > "$OUT/figures.txt"
echo "== building hematite-sim, the provider, hematite-run ($PROFILE profile) and the C verbs programs"
{ cargo build -q --profile "$PROFILE" -p hematite-sim --bin hematite-sim && cargo build -q --profile "$PROFILE" -p hematite-verbs -p hematite-run; } || exit 1
bash tests/verbs/build.sh "$OUT/bin" || exit 1

RUN="$ROOT/$TDIR/hematite-run"
export HEMATITE_SIM="$ROOT/$TDIR/hematite-sim"
export HEMATITE_PROVIDER="$ROOT/$TDIR/libhematite_verbs.so"
export HEMATITE_FW="$ROOT/build/fw/firmware.hex"
STATE="$(mktemp -d /tmp/hm-verbs.XXXXXX)"
BIN="$OUT/bin"
LOGS="$OUT/logs"
rm -rf "$LOGS"; mkdir -p "$LOGS"
trap '"$RUN" --state "$STATE" --stop >/dev/null 2>&1; rm -rf "$STATE"' EXIT

pass=0; fail=0; failed=()
# each result line shows its row's wall time (since the previous result line)
row_t0=$SECONDS
ok() { local d=$((SECONDS - row_t0)); row_t0=$SECONDS; pass=$((pass + 1)); printf 'ok    %-28s %4ss  %s\n' "$1" "$d" "${2:-}"; echo "$1: ${2:-}" >> "$OUT/figures.txt"; }
bad() { local d=$((SECONDS - row_t0)); row_t0=$SECONDS; fail=$((fail + 1)); failed+=("$1"); printf 'FAIL  %-28s %4ss  %s\n' "$1" "$d" "$2"; }
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# Starts the devices (and waits for their firmware) before the first scenario.
"$RUN" --state "$STATE" --check > "$LOGS/check.txt" 2>&1 || { cat "$LOGS/check.txt"; echo "hematite-run --check failed"; exit 1; }

# run_pair NAME TIMEOUT READY_REGEX SERVER_CMD... -- CLIENT_CMD...
# The server runs on NIC 0, the client on NIC 1 (each sees only its NIC); the client starts
# once the server printed READY_REGEX, and is retried while the server is not listening yet.
run_pair() {
    local name="$1" tmo="$2" ready="$3"; shift 3
    local srv=() cli=()
    while [ "$1" != "--" ]; do srv+=("$1"); shift; done; shift
    cli=("$@")
    local so="$LOGS/$name.server" co="$LOGS/$name.client"
    # (line-buffered, so that the readiness line shows while the server waits)
    timeout -k 5 "$tmo" "$RUN" --state "$STATE" --nic 0 -- stdbuf -oL -eL "${srv[@]}" > "$so" 2>&1 &
    local spid=$! t=0
    while ! grep -qE "$ready" "$so" 2>/dev/null; do
        sleep 0.5; t=$((t + 1))
        if ! kill -0 $spid 2>/dev/null || [ $t -gt 240 ]; then break; fi
    done
    sleep 1
    local crc=1 try
    for try in 1 2 3 4 5; do
        timeout -k 5 "$tmo" "$RUN" --state "$STATE" --nic 1 -- stdbuf -oL -eL "${cli[@]}" > "$co" 2>&1
        crc=$?
        grep -qiE "couldn't connect|unable to connect|connect.*refused" "$co" || break
        sleep 2
    done
    wait $spid
    local src=$?
    SRV_RC=$src; CLI_RC=$crc
    [ $src -eq 0 ] && [ $crc -eq 0 ]
}

show_fail() { # NAME: the tails of both logs
    for f in "$LOGS/$1".server "$LOGS/$1".client "$LOGS/$1".out; do
        [ -f "$f" ] && { echo "   --- $(basename "$f") (last lines)"; tail -n 6 "$f" | sed 's/^/   /'; }
    done
}

# perftest's result line: the first line after the "#bytes" header.
perf_line() { awk '/#bytes/{getline; print; exit}' "$1"; }

# ---------------------------------------------------------------- device listing and attributes
if want devices; then
    if "$RUN" --state "$STATE" -- ibv_devices > "$LOGS/devices.out" 2>&1 &&
        grep -q "hematite0" "$LOGS/devices.out" && grep -q "hematite1" "$LOGS/devices.out"; then
        ok devices "$(grep -cE "^\s+hematite[0-9]" "$LOGS/devices.out") devices listed"
    else bad devices "ibv_devices did not list hematite0 and hematite1"; show_fail devices; fi
fi

if want devinfo; then
    o="$LOGS/devinfo.out"
    if "$RUN" --state "$STATE" --nic 0 -- ibv_devinfo -v -d hematite0 > "$o" 2>&1 &&
        grep -q "state:.*PORT_ACTIVE" "$o" && grep -q "link_layer:.*Ethernet" "$o" &&
        grep -qE "GID\[ *0\]:.*::ffff:10\.77\.0\.1, RoCE v2" "$o"; then
        qp=$(awk '/max_qp:/{print $2}' "$o"); cqe=$(awk '/max_cqe:/{print $2}' "$o"); rd=$(awk '/max_qp_rd_atom:/{print $2}' "$o")
        if [ "${qp:-0}" -ge 1 ] && [ "${cqe:-0}" -ge 512 ] && [ "${rd:-0}" -ge 1 ]; then
            ok devinfo "max_qp=$qp max_cqe=$cqe max_qp_rd_atom=$rd, GID0 ::ffff:10.77.0.1 RoCE v2, PORT_ACTIVE"
        else bad devinfo "limits: max_qp=$qp max_cqe=$cqe max_qp_rd_atom=$rd"; fi
    else bad devinfo "ibv_devinfo -v: port not active / not Ethernet / no RoCE v2 GID"; show_fail devinfo; fi
fi

# ---------------------------------------------------------------- ibv_rc_pingpong, ibv_uc_pingpong
pingpong() { # NAME ARGS... (ibv_rc_pingpong; PP_TOOL for another)
    local name="$1" tool="${PP_TOOL:-ibv_rc_pingpong}"; shift
    want "$name" || return 0
    if run_pair "$name" 300 "local address" "$tool" -d hematite0 -g 0 "$@" -- "$tool" -d hematite1 -g 0 "$@" 127.0.0.1; then
        local l; l=$(grep -h "iters in" "$LOGS/$name.client")
        if [ -n "$l" ]; then ok "$name" "$(grep -h 'bytes in' "$LOGS/$name.client") | $l"; else bad "$name" "no figures printed"; fi
    else bad "$name" "server rc=$SRV_RC client rc=$CLI_RC"; show_fail "$name"; fi
}
if [ $QUICK -eq 1 ]; then pingpong pingpong -n 100; else pingpong pingpong; fi
pingpong pingpong_64k -s 65536 -n 100 -c
pingpong pingpong_events -n 100 -e
# UC: rdma-core's own UC example, unmodified
PP_TOOL=ibv_uc_pingpong pingpong uc_pingpong -n 100
PP_TOOL=ibv_uc_pingpong pingpong uc_pingpong_4k -s 4096 -n 100

# ---------------------------------------------------------------- perftest
stat_val() { # FILE NIC DIR/NAME: the value in a --stat table (-1 when there is none)
    local v
    v=$(awk -v k="$3" -v n="$2" '$1=="counter"{for(i=2;i<=NF;i++) if($i=="hematite"n) c=i} $1==k{print $c}' "$1" 2>/dev/null)
    [[ "$v" =~ ^[0-9]+$ ]] && echo "$v" || echo -1
}
perf() { # NAME TOOL ARGS...
    local name="$1" tool="$2"; shift 2
    want "$name" || return 0
    local rc note="" try
    for try in 1 2; do
        run_pair "$name" 400 "Waiting for client|local address" "$tool" -d hematite0 -x 0 "$@" -- "$tool" -d hematite1 -x 0 "$@" 127.0.0.1
        rc=$?
        # perftest calibrates the host's cycle counter against its clock before it reports,
        # and gives up ("Correlation coefficient r^2 ... < 0.9", no report) when the host is
        # too busy to sample it evenly: nothing about the NIC. Run such a case once more.
        if [ $try -eq 1 ] && grep -q "Correlation coefficient" "$LOGS/$name.client" 2>/dev/null &&
            [ -z "$(perf_line "$LOGS/$name.client" | grep -v Correlation)" ]; then
            note=" (run twice: perftest's clock calibration failed on a busy host the first time)"
            continue
        fi
        break
    done
    if [ $rc -eq 0 ]; then
        local l; l=$(perf_line "$LOGS/$name.client")
        # bw: bytes iters peak avg msg-rate; lat: bytes iters min max typical avg ... (usec).
        # The iteration count must be what was asked for, the rate / average above zero.
        local iters; iters=$(sed -nE 's/.*-n ([0-9]+).*/\1/p' <<<"$*")
        if [ -n "$l" ] && awk -v l="$l" -v it="$iters" -v lat="$([[ $tool == *_lat ]] && echo 1 || echo 0)" \
            'BEGIN{n=split(l,f," "); v=lat ? f[6] : f[5]; exit !(n>=5 && f[2]==it && v+0>0)}'; then
            ok "$name" "$tool $* -> $l$note"
        else bad "$name" "no result line: '$l'$note"; show_fail "$name"; fi
    else bad "$name" "server rc=$SRV_RC client rc=$CLI_RC"; show_fail "$name"; fi
}
N=100; [ $QUICK -eq 1 ] && N=20
perf write_bw ib_write_bw -s 65536 -n $N
perf read_bw ib_read_bw -s 65536 -n $N
perf send_bw ib_send_bw -s 65536 -n $N
perf atomic_bw_fadd ib_atomic_bw -A FETCH_AND_ADD -n $N
perf atomic_bw_cas ib_atomic_bw -A CMP_AND_SWAP -n $N
# ib_write_lat posts one WR at a time: each goes through the MMIO path (pushed whole before
# its doorbell, hw_counters/push_used; docs/transport-engine.md, "Latency")
if want write_lat; then "$RUN" --state "$STATE" -- true; sleep 3; "$RUN" --state "$STATE" --stat > "$LOGS/push.before" 2>&1; fi
perf write_lat ib_write_lat -s 64 -n $N
if want write_lat; then
    sleep 3; "$RUN" --state "$STATE" --stat > "$LOGS/push.after" 2>&1
    pu0=$(( $(stat_val "$LOGS/push.after" 0 hw_counters/push_used) - $(stat_val "$LOGS/push.before" 0 hw_counters/push_used) ))
    pu1=$(( $(stat_val "$LOGS/push.after" 1 hw_counters/push_used) - $(stat_val "$LOGS/push.before" 1 hw_counters/push_used) ))
    pd0=$(( $(stat_val "$LOGS/push.after" 0 hw_counters/push_dropped) - $(stat_val "$LOGS/push.before" 0 hw_counters/push_dropped) ))
    if [ "$pu0" -ge "$N" ] && [ "$pu1" -ge "$N" ]; then
        ok write_lat_push "ib_write_lat -n $N: WQEs sent from pushes, NIC 0 +$pu0, NIC 1 +$pu1 (NIC 0 pushes dropped +$pd0)"
    else bad write_lat_push "push_used +$pu0 / +$pu1, expected at least $N each (push_dropped NIC 0 +$pd0)"; fi
fi
perf send_lat ib_send_lat -s 64 -n $N
perf read_lat ib_read_lat -s 64 -n $N
# UC (perftest's -c UC): no ACKs; a message the receiver drops would stop the run
perf write_bw_uc ib_write_bw -c UC -s 65536 -n $N
perf send_bw_uc ib_send_bw -c UC -s 65536 -n $N
perf send_lat_uc ib_send_lat -c UC -s 64 -n $N
if [ $QUICK -eq 0 ]; then
    perf write_bw_1m ib_write_bw -s 1048576 -n 8
    perf read_bw_1m ib_read_bw -s 1048576 -n 8
    perf send_bw_1m ib_send_bw -s 1048576 -n 8
    perf write_lat_1m ib_write_lat -s 1048576 -n 5
    perf send_lat_64k ib_send_lat -s 65536 -n 20
    perf read_lat_64k ib_read_lat -s 65536 -n 20
fi

# ---------------------------------------------------------------- counters (docs/counters.md)
# The port counters the device processes keep as files (hematite-run --stat, and the sysfs
# tree's ports/1/counters and hw_counters): an ib_write_bw run moves them by what it did, what
# NIC 1 sent NIC 0 received (a lossless wire), and a program reads them where collectors do.
if want counters; then
    sa="$LOGS/counters.before"; sb="$LOGS/counters.after"
    "$RUN" --state "$STATE" -- true    # the NICs run (with --only counters, nothing started them)
    sleep 3; "$RUN" --state "$STATE" --stat > "$sa" 2>&1
    run_pair counters 400 "Waiting for client" ib_write_bw -d hematite0 -x 0 -s 65536 -n 100 -- ib_write_bw -d hematite1 -x 0 -s 65536 -n 100 127.0.0.1
    rc=$?
    sleep 3; "$RUN" --state "$STATE" --stat > "$sb" 2>&1; src=$?
    d() { echo $(( $(stat_val "$sb" "$1" "$2") - $(stat_val "$sa" "$1" "$2") )); }
    wr=$(d 0 hw_counters/rx_write_requests); words=$(d 1 counters/port_xmit_data)
    # what NIC 1 sent and NIC 0 received during this run (not since the devices started: frames
    # a device still held when an earlier test's program closed it and its function was reset
    # were sent and never received)
    tx1=$(d 1 counters/port_xmit_packets); rx0=$(d 0 counters/port_rcv_packets)
    full0=$(d 0 hw_counters/rx_buffer_full_drops)
    txd1=$(d 1 counters/port_xmit_data); rxd0=$(d 0 counters/port_rcv_data)
    # the file a collector reads, through SYSFS_PATH (and /sys/class itself with the overlay, as root)
    f=class/infiniband/hematite0/ports/1/hw_counters/rx_write_requests
    via=$("$RUN" --state "$STATE" --nic 0 -- sh -c "cat \"\$SYSFS_PATH/$f\"" 2>&1)
    if [ "$(id -u)" = 0 ]; then via_sys=$("$RUN" --state "$STATE" --nic 0 -- cat "/sys/$f" 2>&1); else via_sys="$via"; fi
    nostat=$(mktemp -d /tmp/hm-nostat.XXXXXX)
    "$RUN" --state "$nostat" --stat > "$LOGS/counters.none" 2>&1; nrc=$?
    rm -rf "$nostat"
    # per-QP, live: a longer ib_write_bw, its QPs' counters read while it runs (a QP's
    # counters go with the program's device, at the function reset when it closes)
    cp "$sb" "$LOGS/counters.before_qp"
    ( run_pair counters_qp 600 "Waiting for client" ib_write_bw -d hematite0 -x 0 -s 65536 -n 300 -- ib_write_bw -d hematite1 -x 0 -s 65536 -n 300 127.0.0.1 ) &
    qpid=$!
    qs=""; qc=""; qrx=0; qtx=0; q0rc=1; q1rc=1
    for _ in $(seq 240); do
        sleep 1
        kill -0 $qpid 2>/dev/null || break
        [ -n "$qs" ] || qs=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$LOGS/counters_qp.server" 2>/dev/null | head -1)
        [ -n "$qc" ] || qc=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$LOGS/counters_qp.client" 2>/dev/null | head -1)
        [ -n "$qs" ] && [ -n "$qc" ] || continue
        "$RUN" --state "$STATE" --stat --nic 0 --qp $((qs)) > "$LOGS/counters.qp0" 2>&1; q0rc=$?
        "$RUN" --state "$STATE" --stat --nic 1 --qp $((qc)) > "$LOGS/counters.qp1" 2>&1; q1rc=$?
        qrx=$(stat_val "$LOGS/counters.qp0" 0 qp/reqs_rx); qtx=$(stat_val "$LOGS/counters.qp1" 1 qp/req_pkts_tx)
        [ "${qrx:-0}" -gt 0 ] && [ "${qtx:-0}" -gt 0 ] && break
    done
    wait $qpid; qprc=$?
    sleep 3; "$RUN" --state "$STATE" --stat > "$LOGS/counters.after_qp" 2>&1
    prx=$(( $(stat_val "$LOGS/counters.after_qp" 0 hw_counters/reqs_rx) - $(stat_val "$LOGS/counters.before_qp" 0 hw_counters/reqs_rx) ))
    ptx=$(( $(stat_val "$LOGS/counters.after_qp" 1 hw_counters/req_pkts) - $(stat_val "$LOGS/counters.before_qp" 1 hw_counters/req_pkts) ))
    if [ $rc -eq 0 ] && [ $src -eq 0 ] && [ "${wr:-0}" -ge 100 ] && [ "${words:-0}" -ge $((100 * 65536 / 4)) ] &&
        [ "$tx1" -gt 0 ] && [ "$tx1" = "$((rx0 + full0))" ] && [ "$txd1" -gt 0 ] && [ "$txd1" = "$rxd0" ] &&
        [ "$via" = "$(stat_val "$sb" 0 hw_counters/rx_write_requests)" ] && [ "$via_sys" = "$via" ] && [ $nrc -eq 1 ] &&
        [ $qprc -eq 0 ] && [ $q0rc -eq 0 ] && [ $q1rc -eq 0 ] && [ "${qrx:-0}" -gt 0 ] && [ "${qtx:-0}" -gt 0 ] &&
        [ "$qrx" -le "$prx" ] && [ "$qtx" -le "$ptx" ] && [ "$ptx" -ge 4800 ]; then
        ok counters "ib_write_bw 100 x 64 KiB: NIC 0 rx_write_requests +$wr, NIC 1 port_xmit_data +$words words; during it NIC 1 sent $tx1 frames / $txd1 words, NIC 0 received $rx0 (+$full0 buffer drops) / $rxd0; sysfs file $via; while a 300 x 64 KiB run went on, QP $((qc)) had sent $qtx requests and QP $((qs)) received $qrx (the whole run: $ptx / $prx); --stat with no NIC: exit 1"
    else
        bad counters "rc=$rc stat=$src rx_write_requests +$wr port_xmit_data +$words tx1=$tx1 rx0=$rx0+$full0 words $txd1/$rxd0 sysfs='$via'/'$via_sys' none=$nrc qp: run $qprc stat $q0rc/$q1rc QPs $qs/$qc rx $qrx/$prx tx $qtx/$ptx"
        show_fail counters
    fi
fi

# ---------------------------------------------------------------- our own verbs programs
own() { # NAME TIMEOUT ARGS... (run as server and client)
    local name="$1" tmo="$2"; shift 2
    want "$name" || return 0
    if run_pair "$name" "$tmo" "listening|waiting|local" "$BIN/$name" -d hematite0 "$@" -- "$BIN/$name" -d hematite1 "$@" 127.0.0.1; then
        ok "$name" "$(grep -h '^summary' "$LOGS/$name.client") $(grep -hoE '(iters|bytes|wall_s|mbps)=[0-9.]+' "$LOGS/$name.client" | tr '\n' ' ')"
    else bad "$name" "server rc=$SRV_RC client rc=$CLI_RC"; show_fail "$name"; fi
}
own hm_nccl_replay 400 -n 30
own hm_verbs_ops 400

if want hm_verbs_errors; then
    o="$LOGS/hm_verbs_errors.out"
    if "$RUN" --state "$STATE" --nic 0 -- "$BIN/hm_verbs_errors" -d hematite0 > "$o" 2>&1; then
        ok hm_verbs_errors "$(grep -h '^summary' "$o")"
    else bad hm_verbs_errors "$(grep -h '^summary' "$o"): $(grep -h '^FAIL' "$o" | head -3 | tr '\n' ';')"; show_fail hm_verbs_errors; fi
fi

# Many contexts of one device in one process (issue 22): 16 contexts moving verified data
# between their QPs, cross-context handles refused, a context closed with its objects, the
# limit of 256 contexts.
if want hm_multi_ctx; then
    o="$LOGS/hm_multi_ctx.out"
    if timeout -k 5 600 "$RUN" --state "$STATE" --nic 0 -- "$BIN/hm_multi_ctx" -d hematite0 -n 16 > "$o" 2>&1; then
        ok hm_multi_ctx "$(grep -hE '^ok (ring|context_limit|close_with_objects)' "$o" | cut -c1-110 | tr '\n' ' ')$(grep -h '^summary' "$o")"
    else bad hm_multi_ctx "$(grep -h '^summary' "$o"): $(grep -hE '^(FAIL|TIMEOUT)' "$o" | head -3 | tr '\n' ';')"; show_fail hm_multi_ctx; fi
fi

# The extended verbs API (ibv_create_cq_ex, ibv_create_qp_ex and ibv_wr_*), one NIC.
if want hm_verbs_ex; then
    o="$LOGS/hm_verbs_ex.out"
    if timeout -k 5 300 "$RUN" --state "$STATE" --nic 0 -- "$BIN/hm_verbs_ex" -d hematite0 > "$o" 2>&1; then
        ok hm_verbs_ex "$(grep -h '^summary' "$o")"
    else bad hm_verbs_ex "$(grep -h '^summary' "$o"): $(grep -hE '^(FAIL|TIMEOUT)' "$o" | head -3 | tr '\n' ';')"; show_fail hm_verbs_ex; fi
fi

# ibv_rereg_mr: access, keys, translation and PD changes seen on the wire, and refusals that
# leave the MR as it was (one process, two QPs through the port's loopback)
if want hm_mr_rereg; then
    o="$LOGS/hm_mr_rereg.out"
    if timeout -k 5 300 "$RUN" --state "$STATE" --nic 0 -- "$BIN/hm_mr_rereg" -d hematite0 > "$o" 2>&1; then
        ok hm_mr_rereg "$(grep -h '^summary' "$o")"
    else bad hm_mr_rereg "$(grep -h '^summary' "$o"): $(grep -hE '^(FAIL|TIMEOUT)' "$o" | head -3 | tr '\n' ';')"; show_fail hm_mr_rereg; fi
fi

# UC queue pairs: UC's attribute masks, SEND / WRITE with and without immediate at one packet
# and several, messages dropped without an ACK or NAK (no receive, a wrong rkey, no remote
# write) while the QPs go on, the operations UC refuses, a receive error (one process, two UC
# QPs through the port's loopback)
if want hm_uc; then
    o="$LOGS/hm_uc.out"
    if timeout -k 5 300 "$RUN" --state "$STATE" --nic 0 -- "$BIN/hm_uc" -d hematite0 > "$o" 2>&1; then
        ok hm_uc "$(grep -h '^summary' "$o")"
    else bad hm_uc "$(grep -h '^summary' "$o"): $(grep -hE '^(FAIL|TIMEOUT)' "$o" | head -3 | tr '\n' ';')"; show_fail hm_uc; fi
fi

# The verbs-call fuzzer, a short run: 3,000 seeded calls (bad handles, sizes, flags, opcodes,
# orders, error completions, interleaved with verified data movement) over both NICs; the
# long run is tests/verbs/fuzz.sh --count 100000.
if want hm_verbs_fuzz; then
    o="$LOGS/hm_verbs_fuzz.out"
    n=3000; [ $QUICK -eq 1 ] && n=1000
    t0=$SECONDS
    timeout -k 5 400 "$RUN" --state "$STATE" -- "$BIN/hm_verbs_fuzz" --count $n --seed 1 > "$o" 2>&1
    rc=$?
    last=$(grep -h '^fuzz verbs:' "$o" | tail -1)
    if [ $rc -eq 0 ] && [ "$last" = "fuzz verbs: $n cases, 0 findings" ]; then
        ok hm_verbs_fuzz "$last ($((SECONDS - t0)) s, seed 1)"
    else
        bad hm_verbs_fuzz "rc=$rc ${last:-no result line}: $(grep -hE '^(FINDING|TIMEOUT)' "$o" | head -3 | tr '\n' ';')"
        show_fail hm_verbs_fuzz
    fi
fi

# A peer that disappears mid-run: the survivor gets RETRY_EXC_ERR, flushes, ERR, QP_FATAL.
if want peer_loss; then
    so="$LOGS/peer_loss.server"; co="$LOGS/peer_loss.client"
    ( timeout -k 5 300 "$RUN" --state "$STATE" --nic 0 -- stdbuf -oL "$BIN/hm_peer_loss" -d hematite0 > "$so" 2>&1 ) &
    spid=$!
    for _ in $(seq 240); do grep -q "waiting for client" "$so" 2>/dev/null && break; sleep 0.5; done
    timeout -k 5 300 "$RUN" --state "$STATE" --nic 1 -- stdbuf -oL "$BIN/hm_peer_loss" -d hematite1 127.0.0.1 > "$co" 2>&1 &
    cpid=$!
    for _ in $(seq 240); do grep -q "writing until" "$co" 2>/dev/null && break; sleep 0.5; done
    sleep 2
    pkill -KILL -f "hm_peer_loss -d hematite0"
    wait $cpid; crc=$?
    wait $spid 2>/dev/null
    if [ $crc -eq 0 ]; then
        ok peer_loss "peer killed mid-run: $(grep -hE '^ok (writes_before_loss|retry_exceeded)' "$co" | cut -c1-90 | tr '\n' ' ')"
    else bad peer_loss "client rc=$crc"; show_fail peer_loss; fi
    # NIC 0's application was killed: the device took everything back. A new application
    # there gets every PD, CQ and QP ibv_query_device reports (one more of each fails with
    # ENOMEM) and 256 MRs, and a WRITE and a READ of 64 KiB verify with all of them held.
    # (Every MR, 4,096, takes many minutes on a 2-core machine: hm_reclaim without -m.)
    ro="$LOGS/peer_loss_reclaim.out"
    timeout -k 5 1800 "$RUN" --state "$STATE" --nic 0 -- "$BIN/hm_reclaim" -d hematite0 -m 256 > "$ro" 2>&1;rrc=$?
    if [ $rrc -eq 0 ]; then
        ok peer_loss_reclaim "$(grep -hE '^ok (all_pds|all_cqs|cqs|all_qps|qps|mrs|write_verified)' "$ro" | sed -E 's/^ok ([a-z_]+) ([0-9]+ of [0-9]+ [A-Zs]+|64 KiB RDMA WRITE).*/\2/' | tr '\n' ',')$(grep -h '^summary' "$ro")"
    else bad peer_loss_reclaim "rc=$rrc: $(grep -hE '^(FAIL|TIMEOUT)' "$ro" | head -3 | tr '\n' ';')"; show_fail peer_loss_reclaim; fi
fi

# The device process of NIC 1 is killed (SIGKILL) mid-transfer, under a program that has both
# NICs open: IBV_EVENT_DEVICE_FATAL, the WRs in flight and the receives flushed, EIO from every
# verb that needs the device, a clean teardown, NIC 0 unaffected. Then NIC 1 is started again
# (hematite-run starts a NIC whose process is gone) and must list an active port.
if want dev_fatal; then
    o="$LOGS/dev_fatal.out"
    ( timeout -k 5 300 "$RUN" --state "$STATE" -- stdbuf -oL "$BIN/hm_dev_fatal" -a hematite0 -d hematite1 -t 60 > "$o" 2>&1 ) &
    ppid=$!
    for _ in $(seq 480); do grep -q "writing until the device fails" "$o" 2>/dev/null && break; kill -0 $ppid 2>/dev/null || break; sleep 0.5; done
    sleep 1
    dpid=$(cat "$STATE/nic1.pid" 2>/dev/null)
    killed=no
    if grep -q "writing until the device fails" "$o" && [ -n "$dpid" ] &&
        tr '\0' ' ' < "/proc/$dpid/cmdline" 2>/dev/null | grep -q "nic1.sock"; then
        kill -KILL "$dpid" && killed="pid $dpid"
    fi
    wait $ppid; prc=$?
    "$RUN" --state "$STATE" --check > "$LOGS/dev_fatal.restart" 2>&1; rrc=$?
    "$RUN" --state "$STATE" --nic 1 -- ibv_devinfo -d hematite1 > "$LOGS/dev_fatal.devinfo" 2>&1
    if [ "$killed" != no ] && [ $prc -eq 0 ] && [ $rrc -eq 0 ] && grep -q "state:.*PORT_ACTIVE" "$LOGS/dev_fatal.devinfo"; then
        ok dev_fatal "device process $killed killed: $(grep -hE '^ok (device_fatal_event|flushed)' "$o" | cut -c1-100 | tr '\n' ' ')$(grep -h '^summary' "$o"); NIC 1 restarted, port active"
    else
        bad dev_fatal "killed=$killed program rc=$prc restart rc=$rrc: $(grep -hE '^(FAIL|TIMEOUT)' "$o" | head -3 | tr '\n' ';')"
        show_fail dev_fatal
        for f in "$LOGS/dev_fatal.restart" "$LOGS/dev_fatal.devinfo"; do echo "   --- $(basename "$f")"; tail -n 4 "$f" | sed 's/^/   /'; done
    fi
fi

echo
for f in "${failed[@]}"; do echo "FAILED: $f (logs: $LOGS/$f.*)"; done
echo "verbs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

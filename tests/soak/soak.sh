#!/usr/bin/env bash
# The soak: hm_soak (tests/verbs/hm_soak.c) between two simulated Hematite NICs on a faulty wire
# for N minutes, with the memory of all four processes watched.
#
#   tests/soak/soak.sh [--minutes N] [--qps Q] [--seed S] [--fault P] [--rd-atomic N] [--out DIR]
#
#   --minutes N  traffic time (default 60; a fraction is fine, e.g. 0.5)
#   --qps Q      RC QP pairs (default 16)
#   --seed S     seed of the message sizes and contents, and of both devices' fault draws
#   --fault P    probability per transmitted RoCE frame of each wire fault: loss, duplication,
#                reordering, corruption (default 0.01, i.e. 1 % each)
#   --loss P, --dup P, --reorder P, --corrupt P   one fault kind's probability (default --fault)
#   --rd-atomic N  RDMA READs in flight per QP (max_rd_atomic / max_dest_rd_atomic), default 1
#                (4 once stalled the simulated wire within seconds; fixed, docs/verification.md,
#                "Soak")
#   --out DIR    logs and figures (default build/soak)
#
# Builds what it needs (release profile; the firmware image into DIR/fw), starts the two
# devices with the faults (hematite-run --loss, HEMATITE_SIM_ARGS for the others), runs the
# hm_soak server on NIC 0 and the client on NIC 1, samples VmRSS of the two device processes
# and the two programs, and judges:
#   * both programs exit 0: every completion successful, every message verified (0 lost,
#     0 duplicated, 0 corrupted), the device's PD/CQ/MR/QP counts back to the baseline;
#   * each device applied every fault kind at least once (counts from its log at the end);
#   * each program's NIC dropped in its RX path exactly as many frames as the peer device
#     corrupted (the ICRC check catches every corrupted frame, and nothing else is dropped);
#   * RSS flat: for each process, the largest of the last fifth of the samples is at most the
#     largest of the early samples (after a warm-up of the first fifth, up to two fifths) plus
#     1 % + 1024 KiB.
# Prints a final line "soak: PASS|FAIL ..." with the figures; exits 0 only on PASS.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

MIN=60
RDA=1
QPS=16
SEED=1
FAULT=0.01
OUT="$ROOT/build/soak"
source "$ROOT/scripts/lib/opts.sh"
hm_opts "[--minutes N] [--qps Q] [--seed S] [--fault P] [--loss|--dup|--reorder|--corrupt P] [--rd-atomic N] [--out DIR]" \
    --minutes=MIN --qps=QPS --seed=SEED --fault=FAULT --loss=P_LOSS --dup=P_DUP --reorder=P_REORDER --corrupt=P_CORRUPT --rd-atomic=RDA --out=OUT -- "$@"
P_LOSS=${P_LOSS:-$FAULT}; P_DUP=${P_DUP:-$FAULT}; P_REORDER=${P_REORDER:-$FAULT}; P_CORRUPT=${P_CORRUPT:-$FAULT}
SECS=$(awk -v m="$MIN" 'BEGIN{ s = m * 60; if (s < 10) s = 10; printf "%d", s }')
# RSS samples: every 30 s, more often for short runs (at least 15 samples)
IVL=$(awk -v s="$SECS" 'BEGIN{ i = int(s / 15); if (i > 30) i = 30; if (i < 2) i = 2; print i }')
mkdir -p "$OUT"
echo "== soak: $MIN min ($SECS s), $QPS QP pairs, $RDA READs in flight per QP, faults loss $P_LOSS dup $P_DUP reorder $P_REORDER corrupt $P_CORRUPT, seed $SEED, RSS every $IVL s; logs in $OUT"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- sim run hostdrv verbs-provider firmware tests/verbs/hm_soak.c tests/soak 2>/dev/null || echo ' (+ uncommitted changes)'), $(date -u '+%Y-%m-%d %H:%M:%S UTC')"

echo "== building (release): hematite-sim, the provider, hematite-run, the firmware image, hm_soak"
FW_TARGET=riscv32imc-unknown-none-elf
{ cargo build -q --release -p hematite-sim --bin hematite-sim &&
  cargo build -q --release -p hematite-verbs -p hematite-run &&
  mkdir -p "$OUT/fw" &&
  cargo build -q -p hematite-firmware --release --target "$FW_TARGET" &&
  python3 scripts/elf2hex.py "target/$FW_TARGET/release/hematite-firmware" "$OUT/fw/firmware.hex" >/dev/null &&
  gcc -O2 -g -Wall -Wextra -Werror -std=gnu11 -o "$OUT/hm_soak" tests/verbs/hm_soak.c -libverbs -lpthread -ldl
} || { echo "soak: FAIL build"; exit 1; }

RUN="$ROOT/target/release/hematite-run"
export HEMATITE_SIM="$ROOT/target/release/hematite-sim"
export HEMATITE_PROVIDER="$ROOT/target/release/libhematite_verbs.so"
export HEMATITE_FW="$OUT/fw/firmware.hex"
# the faults beside --loss, the seed, and no pcap (an hour of frames would fill the disk)
export HEMATITE_SIM_ARGS="--dup $P_DUP --reorder $P_REORDER --corrupt $P_CORRUPT --seed $SEED ${SOAK_SIM_EXTRA:-}"
# SOAK_PCAP=1 keeps the pcaps (in DIR) for a short diagnostic run
[ "${SOAK_PCAP:-0}" = 1 ] || HEMATITE_SIM_ARGS+=" --pcap /dev/null"
STATE="$(mktemp -d /tmp/hm-soak.XXXXXX)"
stop_devices() { "$RUN" --state "$STATE" --stop >/dev/null 2>&1; }
trap 'stop_devices; rm -rf "$STATE"' EXIT
rm -f "$OUT"/server.* "$OUT"/client.* "$OUT"/nic*.log "$OUT/rss.tsv"

# start the devices with the faults
"$RUN" --state "$STATE" --loss "$P_LOSS" -- true > "$OUT/start.log" 2>&1 || { cat "$OUT/start.log"; echo "soak: FAIL starting the devices"; exit 1; }
for n in 0 1; do
    head -1 "$STATE/nic$n.log" | grep -q -- "--loss $P_LOSS .*--corrupt $P_CORRUPT" ||
        { echo "soak: FAIL nic$n was not started with the faults: $(head -1 "$STATE/nic$n.log")"; exit 1; }
done
DPID0=$(cat "$STATE/nic0.pid"); DPID1=$(cat "$STATE/nic1.pid")

SOAK=("$OUT/hm_soak" -q "$QPS" -s "$SEED" -o "${SOAK_TIMEOUT_CODE:-8}" -r 7 -t "${SOAK_STEP_S:-300}" -i "$IVL" -O "${SOAK_OPS:-7}" -R "$RDA")
timeout -k 10 $((SECS + 900)) "$RUN" --state "$STATE" --nic 0 -- stdbuf -oL "${SOAK[@]}" -d hematite0 -P "$OUT/server.pid" > "$OUT/server.log" 2>&1 &
SPID=$!
for _ in $(seq 600); do grep -q "waiting for client" "$OUT/server.log" 2>/dev/null && break; kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
grep -q "waiting for client" "$OUT/server.log" || { cat "$OUT/server.log"; echo "soak: FAIL the server did not start"; exit 1; }
timeout -k 10 $((SECS + 900)) "$RUN" --state "$STATE" --nic 1 -- stdbuf -oL "${SOAK[@]}" -d hematite1 -T "$SECS" -P "$OUT/client.pid" 127.0.0.1 > "$OUT/client.log" 2>&1 &
CPID=$!

rss() { awk '/^VmRSS:/{print $2; f=1} END{if(!f) print "-"}' "/proc/$1/status" 2>/dev/null || echo -; }
t0=$SECONDS
printf 't_s\tnic0\tnic1\tserver\tclient\n' > "$OUT/rss.tsv"
next=$IVL
# on a terminal, one status line on stderr: the traffic time elapsed and left (nothing when
# stderr is a file or a pipe)
hms() { printf '%d:%02d:%02d' $(($1 / 3600)) $(($1 / 60 % 60)) $(($1 % 60)); }
while kill -0 $CPID 2>/dev/null || kill -0 $SPID 2>/dev/null; do
    sleep 1
    if [ -t 2 ]; then
        el=$((SECONDS - t0))
        if [ "$el" -lt "$SECS" ]; then
            printf '\r\033[Ksoak: %s of %s traffic, about %s left, then the checks' "$(hms $el)" "$(hms "$SECS")" "$(hms $((SECS - el)))" >&2
        else
            printf '\r\033[Ksoak: %s: the %s of traffic are over; the peers finish and report' "$(hms $el)" "$(hms "$SECS")" >&2
        fi
    fi
    if [ $((SECONDS - t0)) -ge $next ]; then
        next=$((next + IVL))
        sp=$(cat "$OUT/server.pid" 2>/dev/null); cp=$(cat "$OUT/client.pid" 2>/dev/null)
        printf '%d\t%s\t%s\t%s\t%s\n' $((SECONDS - t0)) "$(rss "$DPID0")" "$(rss "$DPID1")" "$(rss "${sp:-0}")" "$(rss "${cp:-0}")" >> "$OUT/rss.tsv"
    fi
done
if [ -t 2 ]; then printf '\r\033[K' >&2; fi
wait $SPID; SRC=$?
wait $CPID; CRC=$?
stop_devices
cp "$STATE/nic0.log" "$STATE/nic1.log" "$OUT/" 2>/dev/null
[ "${SOAK_PCAP:-0}" = 1 ] && cp "$STATE/nic0.pcap" "$STATE/nic1.pcap" "$OUT/" 2>/dev/null

fails=()
[ $SRC -eq 0 ] || fails+=("server exit $SRC")
[ $CRC -eq 0 ] || fails+=("client exit $CRC")
sl=$(grep -h '^soak: server' "$OUT/server.log" | tail -1)
cl=$(grep -h '^soak: client' "$OUT/client.log" | tail -1)
[ -n "$sl" ] || fails+=("no server result line")
[ -n "$cl" ] || fails+=("no client result line")
field() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<<"$2"; }
for l in "$sl" "$cl"; do
    [ -n "$l" ] || continue
    for k in lost duplicated corrupted wc_errors; do
        [ "$(field $k "$l")" = 0 ] || fails+=("$(cut -d' ' -f2 <<<"$l") $k=$(field $k "$l")")
    done
    [ "$(field resources_start "$l")" = "$(field resources_end "$l")" ] && [ -n "$(field resources_end "$l")" ] ||
        fails+=("$(cut -d' ' -f2 <<<"$l") resources start $(field resources_start "$l") end $(field resources_end "$l")")
done
declare -A F
for n in 0 1; do
    fl=$(grep -h 'wire faults applied' "$OUT/nic$n.log" | tail -1)
    for k in lost duplicated reordered corrupted; do
        v=$(sed -nE "s/.* $k ([0-9]+).*/\1/p" <<<"$fl")
        F[$n.$k]=${v:--}
        # every kind asked for must have happened
        p=$P_LOSS; case $k in duplicated) p=$P_DUP ;; reordered) p=$P_REORDER ;; corrupted) p=$P_CORRUPT ;; esac
        if awk -v p="$p" 'BEGIN{exit !(p > 0)}'; then
            [ -n "$v" ] && [ "$v" -gt 0 ] || fails+=("nic$n applied no '$k' fault (${v:-no count in its log})")
        fi
    done
done
# NIC 0 (server) receives what nic1 transmitted, and the other way round
rx0=$(field rx_dropped "$sl"); rx1=$(field rx_dropped "$cl")
[ -z "$sl" ] || [ "$rx0" = "${F[1.corrupted]}" ] || fails+=("nic0 RX dropped $rx0 frames, nic1 corrupted ${F[1.corrupted]}")
[ -z "$cl" ] || [ "$rx1" = "${F[0.corrupted]}" ] || fails+=("nic1 RX dropped $rx1 frames, nic0 corrupted ${F[0.corrupted]}")

# RSS: warm-up = first fifth of the samples, early = up to two fifths, late = last fifth
rsum=""
for col in 2 3 4 5; do
    name=$(awk -v c=$col 'NR==1{print $c}' "$OUT/rss.tsv")
    res=$(awk -v c=$col 'NR>1 && $c!="-" {v[n++]=$c}
        END{ if (n < 5) { print "few " n; exit }
             w = int(n / 5); if (w < 1) w = 1; e = int(2 * n / 5); if (e <= w) e = w + 1
             em = 0; for (i = w; i < e; i++) if (v[i] > em) em = v[i]
             lm = 0; for (i = n - int(n / 5); i < n; i++) if (v[i] > lm) lm = v[i]
             lim = int(em * 1.01) + 1024
             printf "%s %s %s %s %s %d\n", (lm <= lim ? "ok" : "grew"), v[0], v[n-1], em, lm, n }' "$OUT/rss.tsv")
    set -- $res
    case "$1" in
        ok) rsum+=" $name=$2/$3" ;;
        grew) rsum+=" $name=$2/$3"; fails+=("RSS of $name grew: late max $5 KiB > early max $4 KiB + 1 % + 1024 KiB") ;;
        *) rsum+=" $name=?"; fails+=("RSS of $name: only $2 samples (at least 5 are needed)") ;;
    esac
done

for f in server client; do
    grep -hE '^(FAIL|TIMEOUT)' "$OUT/$f.log" | head -3 | sed "s/^/$f: /"
done
verdict=PASS; [ ${#fails[@]} -eq 0 ] || verdict=FAIL
for f in "${fails[@]}"; do echo "FAIL: $f"; done
echo "soak: $verdict minutes=$MIN qps=$QPS rd_atomic=$RDA messages=$(field messages "$cl") bytes=$(field bytes "$cl")" \
    "reads_verified=$(field reads_verified "$cl") server_verified=$(field verified "$sl")" \
    "lost=$(field lost "$sl")+$(field lost "$cl") duplicated=$(field duplicated "$sl")+$(field duplicated "$cl") corrupted=$(field corrupted "$sl")+$(field corrupted "$cl")" \
    "faults nic0 lost/dup/reord/corrupt=${F[0.lost]}/${F[0.duplicated]}/${F[0.reordered]}/${F[0.corrupted]}" \
    "nic1=${F[1.lost]}/${F[1.duplicated]}/${F[1.reordered]}/${F[1.corrupted]} rx_dropped nic0=$rx0 nic1=$rx1" \
    "rss_kb first/last$rsum resources(PD/CQ/MR/QP) start/end server=$(field resources_start "$sl")/$(field resources_end "$sl")" \
    "client=$(field resources_start "$cl")/$(field resources_end "$cl")"
[ "$verdict" = PASS ]

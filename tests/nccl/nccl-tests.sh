#!/usr/bin/env bash
# NCCL's all_reduce_perf (nccl-tests) with 2 ranks over two simulated Hematite NICs, NCCL's IB
# transport on both. For a machine with 2 or more NVIDIA GPUs and the CUDA toolkit: it is NOT
# part of the suite (no GPU there), and it has not been run on this project's machines
# (docs/verbs-provider.md, "NCCL over the simulated NICs").
#
#   tests/nccl/nccl-tests.sh [--profile release|test] [--max-bytes N] [--out DIR]
#
# What it does:
#   1. NCCL from PyPI (nvidia-nccl-cu12, pinned) into build/nccl/venv, nccl-tests (a pinned tag)
#      cloned and built against it with CUDA_HOME (default /usr/local/cuda), MPI=0;
#   2. both NICs started by hematite-run (as root, so that NCCL, which reads /sys/class itself,
#      sees them and their PCI functions through the overlay);
#   3. one process, two GPUs (`-g 2`, two ranks), P2P and shared memory off so that the ranks
#      talk through the network plugin: NCCL_IB_HCA=hematite0,hematite1, GID index 0 (RoCE v2,
#      IPv4-mapped), GPU memory staged through host memory (NCCL_NET_GDR_LEVEL=LOC: the provider
#      has no dma-buf MRs), bootstrap over loopback;
#   4. all_reduce_perf from 8 B to --max-bytes (default 1 MiB), doubling, each size checked
#      (-c 1). Passes when NCCL's log shows the IB transport on the Hematite NICs and the run
#      ends with "Out of bounds values : 0 OK".
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT" || exit 2
# shellcheck source=scripts/lib/opts.sh
. scripts/lib/opts.sh
# shellcheck source=scripts/lib/simrun.sh
. scripts/lib/simrun.sh
PROFILE=release; MAXB=1048576; OUT="$ROOT/build/nccl"
hm_opts "[--profile release|test] [--max-bytes N] [--out DIR]" --profile=PROFILE --max-bytes=MAXB --out=OUT -- "$@"
case "$PROFILE" in release|test) ;; *) echo "bad profile: $PROFILE" >&2; exit 2 ;; esac
NCCL_PYPI="nvidia-nccl-cu12==2.21.5"
NCCL_TESTS_TAG="v2.13.10"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${ngpu:-0}" -ge 2 ] || { echo "nccl-tests.sh: needs 2 NVIDIA GPUs (nvidia-smi -L lists ${ngpu:-0})" >&2; exit 2; }
[ -x "$CUDA_HOME/bin/nvcc" ] || { echo "nccl-tests.sh: no nvcc under CUDA_HOME=$CUDA_HOME" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "nccl-tests.sh: run as root (NCCL reads /sys/class: hematite-run's overlay)" >&2; exit 2; }
mkdir -p "$OUT"

echo "== NCCL ($NCCL_PYPI) and nccl-tests $NCCL_TESTS_TAG"
if [ ! -x "$OUT/venv/bin/python3" ]; then python3 -m venv "$OUT/venv" || exit 2; fi
"$OUT/venv/bin/pip" install -q "$NCCL_PYPI" || exit 2
pkg=$("$OUT/venv/bin/python3" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null) ||
    pkg=$(ls -d "$OUT"/venv/lib/python3*/site-packages/nvidia/nccl | head -1)
NCCL_HOME="$OUT/home"
mkdir -p "$NCCL_HOME/lib"
ln -sfn "$pkg/include" "$NCCL_HOME/include"
ln -sf "$pkg/lib/libnccl.so.2" "$NCCL_HOME/lib/libnccl.so.2"
ln -sf "$pkg/lib/libnccl.so.2" "$NCCL_HOME/lib/libnccl.so"
if [ ! -x "$OUT/nccl-tests/build/all_reduce_perf" ]; then
    rm -rf "$OUT/nccl-tests"
    git clone -q --depth 1 --branch "$NCCL_TESTS_TAG" https://github.com/NVIDIA/nccl-tests "$OUT/nccl-tests" || exit 2
    make -s -C "$OUT/nccl-tests" MPI=0 CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_HOME" > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi

hm_sim_build "$PROFILE" || exit $?
STATE="$(mktemp -d /tmp/hm-nccl.XXXXXX)"
trap '"$RUN" --state "$STATE" --stop >/dev/null 2>&1; rm -rf "$STATE"' EXIT

log="$OUT/all_reduce_perf.log"
echo "== all_reduce_perf -g 2, 8 B .. $MAXB B, over hematite0 and hematite1 (log: $log)"
env LD_LIBRARY_PATH="$NCCL_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    NCCL_IB_HCA=hematite0,hematite1 NCCL_IB_GID_INDEX=0 NCCL_NET_GDR_LEVEL=LOC \
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo \
    CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1}" \
    timeout -k 10 3600 "$RUN" --state "$STATE" -- "$OUT/nccl-tests/build/all_reduce_perf" \
    -b 8 -e "$MAXB" -f 2 -g 2 -c 1 -n 5 -w 1 > "$log" 2>&1
rc=$?
ib=$(grep -cE 'NET/IB ?: ?Using .*hematite' "$log")
res=$(grep -E 'Out of bounds values' "$log" | tail -1)
bw=$(grep -E 'Avg bus bandwidth' "$log" | tail -1)
echo "exit $rc; NCCL's IB transport on hematite NICs: $([ "$ib" -gt 0 ] && echo yes || echo no); ${res:-no result line}; ${bw:-}"
if [ $rc -eq 0 ] && [ "$ib" -gt 0 ] && [[ "$res" == *": 0 OK"* ]]; then
    echo "nccl-tests: ok"
    exit 0
fi
echo "nccl-tests: FAILED ($log)"
exit 1

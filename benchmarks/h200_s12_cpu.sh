#!/usr/bin/env bash
# tile-cpu's whole-grid fp32 GEMM (2048^3, examples/gemm.py's matmul) against numpy (OpenBLAS) in the
# same process on the H200 host's 16-core AVX-512 Xeon (issue 19): variants of the parallel structure,
# loop order, K chunk and register block, timed in interleaved rounds (benchmarks/cpu_gemm_blocking.py
# --variants: each round runs every variant once, each call next to numpy's a @ b), CPU only.
# RUN=2 (the default; run 1, 10:49 UTC, is RUN=1: results/xeon-session12/run1) takes at most ~135 s
# (timeouts 90 + 45), expected ~110 s with the compiles:
#   1. 16 threads, 9 rounds: base (the backend's own), rotate=1 (task t walks the packed B block from
#      panel t * panels / tasks on: the tasks no longer all read the same freshly packed panel from
#      the core that packed it at once), sync=barrier + rotate (one parallel launch per GEMM, barriers
#      between the packing and compute phases, instead of a launch per phase: 44 at 2048^3),
#      dyn=1 / dyn=2 (rows in units of 1 or 2 12-row blocks that the threads take from an atomic
#      counter in each phase, instead of one static task per core: a preempted or slower vCPU holds a
#      phase up by one unit at most), dyn=1 + rotate, + prefetch of the streamed B panels 8 k steps
#      ahead, barrier + rotate + prefetch
#   2. 8 threads, 7 rounds: base, dyn=1 + rotate, barrier + rotate
# RUN=1 (~140 s: timeouts 80 + 40 + 20):
#   1. 16 threads, 7 rounds: base, barrier, + kc 384, + BLIS's loop order (B's NR panel in L1, A's
#      rows streamed), + 8x32, + 8x32 in BLIS's order, + a 6x64 block (kc 192), and the 64x256x64
#      tiles (the same whole GEMM: a noise check)
#   2. 8 threads, 7 rounds: base, barrier, barrier + BLIS's order, barrier + 8x32
#   3. 16 threads with TVM_BIND_THREADS=0 (TVM's pool not pinned to cores), 7 rounds: base, barrier
# Expects PYTHONPATH=/tmp/site (tilecore, tile-cpu installed from this tree); run from the repository
# root. Everything goes under $OUT (default /tmp/h200_s12_cpu).
set -u
NAME=h200_s12_cpu source "$(dirname "${BASH_SOURCE[0]}")/h200_env.sh"
lscpu > "$OUT/lscpu.txt" 2>&1
B="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/cpu_gemm_blocking.py --size 2048 --out $OUT"

step() {  # step LABEL TIMEOUT ARGS...
  local label=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$OUT/$label.txt" 2>&1
  echo "$label: rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "ratio|Error|error" "$OUT/$label.txt" | tail -12
}

if [ "${RUN:-2}" = 1 ]; then
  step 1_t16 80 $B --threads 16 --rounds 7 --variants "base;sync=barrier;sync=barrier,kc=384;sync=barrier,order=cols;\
sync=barrier,tile=8x2;sync=barrier,order=cols,tile=8x2;sync=barrier,tile=6x4,kc=192;tiles=64x256x64"
  step 2_t8 40 $B --threads 8 --rounds 7 --variants "base;sync=barrier;sync=barrier,order=cols;sync=barrier,tile=8x2"
  step 3_t16_unbound 20 env TVM_BIND_THREADS=0 $B --threads 16 --rounds 7 --variants "base;sync=barrier"
else
  step 1_t16 90 $B --threads 16 --rounds 9 --variants "base;rotate=1;sync=barrier,rotate=1;dyn=1;dyn=2,rotate=1;\
dyn=1,rotate=1;dyn=1,rotate=1,ahead=8;sync=barrier,rotate=1,ahead=8"
  step 2_t8 45 $B --threads 8 --rounds 7 --variants "base;dyn=1,rotate=1;sync=barrier,rotate=1"
fi

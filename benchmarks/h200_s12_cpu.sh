#!/usr/bin/env bash
# tile-cpu's whole-grid fp32 GEMM (2048^3, examples/gemm.py's matmul) against numpy (OpenBLAS) in the
# same process on the H200 host's 16-core AVX-512 Xeon (issue 19): variants of the parallel structure,
# loop order, K chunk and register block, timed in interleaved rounds (benchmarks/cpu_gemm_blocking.py
# --variants: each round runs every variant once, each call next to numpy's a @ b), CPU only. At most
# ~140 s (timeouts 85 + 35 + 20); expected ~110 s with the compiles:
#   1. 16 threads, 7 rounds: base (the backend's own), sync=barrier (one parallel launch per GEMM,
#      barriers between the packing and compute phases, instead of a launch per phase: 44 at 2048^3),
#      + kc 384, + BLIS's loop order (B's NR panel in L1, A's rows streamed), + an 8x32 register block
#      (2048 rows split evenly into 16 tasks of 16 blocks; 12-row blocks give 11 blocks to most tasks
#      and 68 rows to the last), + 8x32 in BLIS's order, + a 6x64 block (kc 192), + software prefetch
#      of the streamed panels 8 k steps ahead (gemm_grid.PREFETCH_K) in either order, and the
#      64x256x64 tiles (the same whole GEMM: a noise check)
#   2. 8 threads, 7 rounds: base, barrier, barrier + 8x32
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

step 1_t16 85 $B --threads 16 --rounds 7 --variants "base;sync=barrier;sync=barrier,kc=384;sync=barrier,order=cols;\
sync=barrier,tile=8x2;sync=barrier,order=cols,tile=8x2;sync=barrier,tile=6x4,kc=192;sync=barrier,ahead=8;\
sync=barrier,order=cols,ahead=8;tiles=64x256x64"
step 2_t8 35 $B --threads 8 --rounds 7 --variants "base;sync=barrier;sync=barrier,tile=8x2"
step 3_t16_unbound 20 env TVM_BIND_THREADS=0 $B --threads 16 --rounds 7 --variants "base;sync=barrier"

#!/usr/bin/env bash
# Persistent warp-specialized GEMM (tile_cuda/persistent.py, option persistent) on an H200, < 240 s:
#   1. the GPU tests of plugins/tile-cuda/tests/test_persistent.py and test_tma_store.py (timeout
#      150): persistent and TMA-store epilogues against torch and bitwise against the plain kernel,
#      ragged shapes, fewer and more tiles than SMs, fp16 / bf16, T.use_swizzle panels, TMA and
#      cp.async producers, k-tiles <= stages, out_idx outputs through the C FastCall
#   2. benchmarks/cuda_ws_compare.py gemm N 128 256 64 3 256 persist [DTYPE]: one block per tile
#      ("ws") and persistent, each with and without the epilogue's TMA stores, next to cuBLAS, for
#      4096^3 / 8192^3 / 4000^3 fp16 and 4096^3 bf16,
#      each in its own process (a deadlock shows as its timeout). They compile while the tests run
#      and take turns at the GPU (TC_TIMING_LOCK: the tests hold the lock until they end).
# Expects PYTHONPATH=/tmp/site (tilecore, tile-cuda installed from this tree); run from the repository
# root. Everything goes under $OUT (default /tmp/h200_s12_persist).
set -u
NAME=h200_s12_persist source "$(dirname "${BASH_SOURCE[0]}")/h200_env.sh"

T=plugins/tile-cuda/tests
LOCK="$OUT/gpu.lock"
: > "$LOCK"
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")  # most of the time is nvcc
(
  flock 9
  timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $XDIST -rfE "$T/test_persistent.py" "$T/test_tma_store.py" \
    > "$OUT/1_gpu_tests.txt" 2>&1
  echo "gpu tests: rc=$?" >> "$OUT/summary.txt"
) 9> "$LOCK" &
TESTS=$!
sleep 2  # the tests take the lock first
PIDS=()
for cfg in "4096 float16" "8192 float16" "4000 float16" "4096 bfloat16"; do
  set -- $cfg
  TC_TIMING_LOCK="$LOCK" timeout 220 python3 benchmarks/cuda_ws_compare.py gemm "$1" 128 256 64 3 256 persist "$2" \
    > "$OUT/2_gemm_$1_$2.json" 2> "$OUT/2_gemm_$1_$2.err" &
  PIDS+=($!)
done
wait $TESTS
grep -E "passed|failed|error|Error|assert" "$OUT/1_gpu_tests.txt" | tail -25
for p in "${PIDS[@]}"; do
  wait "$p"
  echo "bench pid $p: rc=$?" >> "$OUT/summary.txt"
done
cat "$OUT/summary.txt"
for f in "$OUT"/2_gemm_*.err; do tail -3 "$f"; done

python3 - "$OUT"/2_gemm_*.json <<'PY' | tee "$OUT/3_table.txt"
import json, sys
for path in sys.argv[1:]:
    try:
        r = json.loads(open(path).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        print(path, "no result")
        continue
    line = [f"{r['n']}^3 {r['dtype']} {r['cfg']}", f"same_bits={r.get('same_bits')}"]
    for name in ("ws", "persistent", "ws_tma_store", "persistent_tma_store"):
        if name + "_ms" in r:
            line.append(
                f"{name} grid={r[name + '_grid']} err={r[name + '_rel_err']:.1e} "
                f"{r[name + '_tflops']:.0f} TFLOP/s {r[name + '_vs_cublas']:.3f}x"
            )
    line.append(f"cublas {2 * r['n'] ** 3 / r['cublas_ms'] / 1e9:.0f} TFLOP/s")
    print(" | ".join(line))
PY

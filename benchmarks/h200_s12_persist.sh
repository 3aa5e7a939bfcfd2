#!/usr/bin/env bash
# Persistent warp-specialized GEMM (tile_cuda/persistent.py, option persistent) and the TMA-store
# epilogue (tile_cuda/tma_store.py, option tma_store) on an H200, < 240 s (run 1 took ~60 s):
#   1. the GPU tests of plugins/tile-cuda/tests/test_persistent.py and test_tma_store.py (timeout
#      150): both against torch and bitwise against the plain kernel, nothing written past C,
#      ragged shapes, fewer and more tiles than SMs, fp16 / bf16, T.use_swizzle panels, TMA and
#      cp.async producers, k-tiles <= stages, out_idx outputs through the C FastCall
#   2. benchmarks/cuda_ws_compare.py gemm N 128 256 64 3 256 persist [DTYPE]: one block per tile
#      ("ws") and persistent, each with and without the TMA-store epilogue, next to cuBLAS, for
#      4096^3 / 8192^3 / 4000^3 fp16 and 4096^3 bf16, 3 rounds taking turns (TC_TIMING_ROUNDS),
#      each size in its own process (a kernel that never ends shows as TC_TIMING_LIMIT / timeout).
#      They compile while the tests run and take turns at the GPU (TC_TIMING_LOCK: the tests hold
#      the lock until they end).
#   3. ncu at 8192^3 fp16: time, DRAM bytes and L2 hit rate of ws, persistent, persistent + TMA store
# Expects PYTHONPATH=/tmp/site (tilecore, tile-cuda installed from this tree); run from the repository
# root. Everything goes under $OUT (default /tmp/h200_s12_persist), at most 8 files.
set -u
NAME=h200_s12_persist source "$(dirname "${BASH_SOURCE[0]}")/h200_env.sh"

T=plugins/tile-cuda/tests
LOCK=$(mktemp /tmp/h200_s12_lock.XXXXXX)
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")  # most of the time is nvcc
(
  flock 9
  timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $XDIST -rfE "$T/test_persistent.py" "$T/test_tma_store.py" \
    2>&1 | grep -v -i "benchmark" > "$OUT/1_gpu_tests.txt"
  echo "gpu tests: rc=${PIPESTATUS[0]}" >> "$OUT/summary.txt"
) 9> "$LOCK" &
TESTS=$!
sleep 2  # the tests take the lock first
PIDS=()
for cfg in "4096 float16" "8192 float16" "4000 float16" "4096 bfloat16"; do
  set -- $cfg
  TC_TIMING_LOCK="$LOCK" TC_TIMING_ROUNDS=3 timeout 200 \
    python3 benchmarks/cuda_ws_compare.py gemm "$1" 128 256 64 3 256 persist "$2" >> "$OUT/2_gemm.jsonl" 2>> "$OUT/2_gemm.err" &
  PIDS+=($!)
done
wait $TESTS
grep -E "passed|failed|error|Error|assert" "$OUT/1_gpu_tests.txt" | tail -25
for p in "${PIDS[@]}"; do
  wait "$p"
  echo "bench pid $p: rc=$?" >> "$OUT/summary.txt"
done
rm -f "$LOCK"
cat "$OUT/summary.txt"
tail -5 "$OUT/2_gemm.err"

python3 - "$OUT/2_gemm.jsonl" <<'PY' | tee "$OUT/3_table.txt"
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    out = [f"{r['n']}^3 {r['dtype']} {r['cfg']}", f"same_bits={r.get('same_bits')}"]
    for name in ("ws", "persistent", "ws_tma_store", "persistent_tma_store"):
        if name + "_ms" in r:
            out.append(
                f"{name} grid={r[name + '_grid']} err={r[name + '_rel_err']:.1e} "
                f"{r[name + '_tflops']:.0f} TFLOP/s {r[name + '_vs_cublas']:.3f}x"
            )
    out.append(f"cublas {2 * r['n'] ** 3 / r['cublas_ms'] / 1e9:.0f} TFLOP/s")
    print(" | ".join(out))
PY

if command -v ncu > /dev/null; then
  timeout 90 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    -k regex:gemm -c 3 python3 - > "$OUT/4_ncu.txt" 2>&1 <<'PY'
import sys
sys.path.insert(0, "benchmarks")
import torch
from cuda_bench import build
import kernels as K  # (cuda_bench puts plugins/tile-cuda/tests on the path)
n = 8192
a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
c = torch.empty(n, n, device="cuda", dtype=torch.float16)
for opts in ({"tma_store": False}, {"persistent": True, "tma_store": False}, {"persistent": True, "tma_store": True}):
    func = K.gemm_kernel(n, n, n, bm=128, bn=256, bk=64, stages=3, threads=256, swizzle_panel=8)
    art, launch, _ = build(func, options=dict(opts, warp_specialize=True))
    print("variant", opts, art.meta["grid_py"], flush=True)
    launch([a, b, c], {})
    torch.cuda.synchronize()
PY
  echo "ncu: rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "variant|gemm_kernel|duration|dram__bytes|hit_rate" "$OUT/4_ncu.txt" | head -30
fi

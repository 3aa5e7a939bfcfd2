#!/usr/bin/env bash
# Split-K for small grids (tile_cuda/split_k.py, option split_k) on an H200. STEPS picks the steps:
# run 1 (08:31 UTC) was STEPS="tests decode ragged ncu" (at most ~240 s: timeouts 70 + 100 + 40 + 25);
# the default, STEPS="tests decode_auto ragged", takes at most ~150 s (50 + 55 + 45):
#   1. the GPU tests of split-K (plugins/tile-cuda/tests/test_split_k.py): decode and ragged shapes,
#      split counts that do not divide the k-tiles, fp16 / bf16, repeated calls reusing the counters,
#      bitwise-equal repeats (the fixed summation order)
#   2. benchmarks/cuda_bench.py --only gemm_decode: 16x8192x8192 fp16, user-written configs, each with
#      split_k auto / off / 4, checked against torch on fresh data, timed next to cuBLAS
#   2'. decode_auto: cuda_bench.py --only gemm_decode_auto: the same configs with split_k auto and off only
#   3. benchmarks/cuda_bench.py --only gemm_ragged: 4000^3 fp16 (auto does not split a grid this large;
#      since run 2 also 128x256 with 4 stages / bK 32, and without TMA or warp specialization)
#   4. ncu (speed of light, memory) of one decode config with split_k auto and off (cache hits of step 2)
# Expects PYTHONPATH=/tmp/site (tilecore, tile-cuda installed from this tree); run from the repository
# root. Everything goes under $OUT (default /tmp/h200_s11_splitk).
set -u
STEPS=${STEPS:-tests decode_auto ragged}
has() { [[ " $STEPS " == *" $1 "* ]]; }
NAME=h200_s11_splitk source "$(dirname "${BASH_SOURCE[0]}")/h200_env.sh"

T=plugins/tile-cuda/tests
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 6")  # most of the time is nvcc
if has tests; then
  timeout 50 python3 -m pytest -q -p no:cacheprovider -m gpu $XDIST -rfE "$T/test_split_k.py" \
    > "$OUT/1_gpu_tests.txt" 2>&1
  echo "gpu tests: rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "passed|failed|Error|assert" "$OUT/1_gpu_tests.txt" | tail -25
fi
bench() {  # bench STEP SECTION TIMEOUT FILE
  has "$1" || return 0
  timeout "$3" python3 benchmarks/cuda_bench.py --only "$2" > "$OUT/$4.jsonl" 2> "$OUT/$4.err"
  echo "$1 bench: rc=$?" | tee -a "$OUT/summary.txt"
  tail -3 "$OUT/$4.err"
}
bench decode gemm_decode 100 2_decode
bench decode_auto gemm_decode_auto 55 2_decode_auto
bench ragged gemm_ragged 45 3_ragged

python3 - "$OUT"/2_decode*.jsonl "$OUT"/3_ragged.jsonl <<'PY' | tee "$OUT/4_table.txt"
import json, sys
for path in sys.argv[1:]:
    try:
        lines = open(path).readlines()
    except OSError:
        continue
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "kernel" not in r:
            continue
        if r["kernel"].endswith("_cublas"):
            print(f"{r['kernel']}: {r['ms'] * 1e3:.1f} us {r['tflops']:.1f} TFLOP/s")
            continue
        if "error" in r:
            print(r["kernel"], r.get("config"), "split_k", r.get("split_k"), "ERROR", r["error"][-200:])
            continue
        print(
            r["kernel"], r.get("config"), f"split_k={r.get('split_k')} -> {r.get('splits')}", r.get("mma"),
            {k: v for k, v in r.get("options", {}).items() if k != "split_k"} or "",
            f"err={r.get('rel_err', float('nan')):.1e}",
            f"{r['ms'] * 1e3:.1f} us {r['tflops']:.1f} TFLOP/s {r['ratio_vs_cublas']:.3f}x" if "ms" in r else "WRONG",
        )
PY

if has ncu && command -v ncu > /dev/null; then
  timeout 25 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy -k regex:main_kernel -c 2 \
    python3 - > "$OUT/5_ncu.txt" 2>&1 <<'PY'
import sys
sys.path.insert(0, "plugins/tile-cuda/tests")
import kernels as KN
import torch
import tilecore
a = torch.randn(16, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
for split in (None, 0):  # split-K auto (4 splits), then off
    kern = tilecore.compile(KN.user_gemm(16, 8192, 8192, 16, 64, 128, 4, 128), target="cuda", out_idx=[-1], split_k=split)
    kern(a, b)
torch.cuda.synchronize()
PY
  echo "ncu: rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Grid Size|Registers Per" "$OUT/5_ncu.txt" | head -24
fi

#!/usr/bin/env bash
# TMA loads in the warp-specialized producer (tile_cuda/tma.py, option tma) on an H200, in at most ~235 s (timeouts 30 + 85 + 30 + 30 + 22 + 35):
#   1. the single-tile TMA GEMM alone (a wrong tensor map shows here first: illegal address or wrong sums)
#   2. the GPU tests of TMA and of the warp-specialized pipeline (which takes TMA by default): GEMM
#      fp16/bf16/int8, transposes, partial tiles, 12+ k-tiles, 128 and 256 threads, attention
#   3. side-by-side timing: warp-specialized with TMA / with cp.async / without warp specialization,
#      against cuBLAS and cuDNN in the same process (benchmarks/cuda_ws_compare.py ... tma)
# Expects PYTHONPATH=/tmp/site (tilecore, tile-cuda, tile-cpu, conformance installed from this tree); run
# from the repository root. Everything goes under $OUT (default /tmp/h200_tma).
set -u
NAME=h200_tma source "$(dirname "${BASH_SOURCE[0]}")/h200_env.sh"

T=plugins/tile-cuda/tests
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")  # most of the time is nvcc: 8 workers where installed
timeout 30 python3 -m pytest -q -p no:cacheprovider -m gpu -s -rfE "$T/test_tma.py" -k single_tile \
  > "$OUT/1_single_tile.txt" 2>&1
echo "single tile: rc=$?" | tee -a "$OUT/summary.txt"
tail -5 "$OUT/1_single_tile.txt"

# -rP: the captured output of passed tests too (the TMA tests print their errors)
timeout 85 python3 -m pytest -q -p no:cacheprovider -m gpu $XDIST -rfEP "$T/test_tma.py" "$T/test_warp_specialize.py" \
  "$T/test_wgmma.py" -k "tma or warp_specialized" > "$OUT/2_gpu_tests.txt" 2>&1
echo "gpu tests: rc=$?" | tee -a "$OUT/summary.txt"
grep -E "^(gemm|attention) |passed|failed|Error" "$OUT/2_gpu_tests.txt" | tail -40

run() {  # one configuration per process (a deadlock shows as the timeout)
  timeout "$1" python3 benchmarks/cuda_ws_compare.py "${@:2}" >> "$OUT/3_timing.jsonl" 2>> "$OUT/3_timing.err"
  echo "timing ${*:2}: rc=$?" | tee -a "$OUT/summary.txt"
}
run 30 gemm 8192 128 256 64 3 256 tma
run 30 gemm 8192 128 128 32 3 128 tma
run 22 gemm 4096 128 128 32 3 128 tma
run 35 attn 0 128 128 2 4096 4 32 float16 tma
python3 - "$OUT/3_timing.jsonl" <<'EOF' | tee "$OUT/3_timing_table.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    keys = [k for k in r if k.endswith(("_vs_cublas", "_vs_cudnn", "_tflops", "_rel_err", "_tma_maps"))]
    print(r["kind"], r.get("n", r.get("S")), r["cfg"], " ".join(f"{k}={r[k]:.3g}" for k in keys))
EOF

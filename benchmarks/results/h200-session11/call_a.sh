#!/usr/bin/env bash
# session 11, call A: the chained warp-specialized consumer gemm (GPU tests + timing)
set -u
OUT=${OUT:-/tmp/s11a}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site TILECORE_CACHE_DIR=/tmp/s11cache
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, tvm, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'tvm', tvm.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
T=plugins/tile-cuda/tests
timeout 110 python3 -m pytest -q -p no:cacheprovider -m gpu -n 8 -rfEP "$T/test_tma.py" "$T/test_warp_specialize.py" "$T/test_wgmma.py" -k "tma or warp_specialized" > "$OUT/1_gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|Error" "$OUT/1_gpu_tests.txt" | tail -8
run() { timeout "$1" python3 benchmarks/cuda_ws_compare.py "${@:2}" >> "$OUT/2_timing.jsonl" 2>> "$OUT/2_timing.err"; echo "timing ${*:2}: rc=$?"; }
run 45 gemm 8192 128 256 64 3 256 chain
run 45 gemm 8192 128 256 64 4 256 chain
run 45 gemm 4096 128 256 64 3 256 chain
run 45 gemm 8192 128 128 32 3 128 chain
run 45 gemm 8192 128 128 64 3 128 chain
run 45 gemm 4096 128 128 32 3 128 chain
run 45 gemm 4000 128 256 64 3 256 chain
python3 - "$OUT/2_timing.jsonl" <<'PY' | tee "$OUT/2_timing_table.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    keys = [k for k in r if k.endswith(("_vs_cublas", "_tflops", "_rel_err"))]
    print(r["kind"], r.get("n"), r["cfg"], " ".join(f"{k}={r[k]:.3g}" for k in keys))
PY
tail -5 "$OUT/2_timing.err"
# where the time goes: one attention kernel (WS, ping-pong) and the chained GEMM under ncu
NCU="ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section SourceCounters -c 1"
timeout 100 $NCU -k regex:main_kernel python3 benchmarks/cuda_ws_compare.py attn 0 128 128 2 4096 4 32 float16 ws > "$OUT/3_ncu_attn.txt" 2>&1; echo "ncu attn rc=$?"
timeout 100 $NCU -k regex:gemm_kernel python3 benchmarks/cuda_ws_compare.py gemm 8192 128 256 64 3 256 > "$OUT/3_ncu_gemm.txt" 2>&1; echo "ncu gemm rc=$?"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Stall|No Eligible|Eligible Warps|Registers Per|Achieved Occ" "$OUT"/3_ncu_*.txt | head -60

#!/usr/bin/env bash
# One H200 session's checks, run on the lent GPU host after staging TVM (see plugins/tile-cuda/README.md):
#   bash benchmarks/h200_check.sh tests   -> GPU tests, examples on cuda, conformance bundle (if present)
#   bash benchmarks/h200_check.sh bench [SECTIONS] -> benchmarks/cuda_bench.py
#   bash benchmarks/h200_check.sh launch  -> launcher/Kernel tests (GPU and not), the overhead section
#   bash benchmarks/h200_check.sh wgmma   -> wgmma tests (GPU and not), the gemm_quickstart section
#   bash benchmarks/h200_check.sh autotune  -> benchmarks/autotune_h200.py (quickstart GEMM 8192^3, 108 configs)
#   bash benchmarks/h200_check.sh overlap -> overlapped wgmma loops: their tests (compile, SASS, GPU), the plain
#                                            wgmma GPU matrix and test_gpu.py, then the gemm_overlap section
#                                            (off / slack / release); about 8 minutes at most
# Logs and JSON go to $OUT (the device tool's result folder), else /tmp/h200.
set -u
OUT=${OUT:-/tmp/h200}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1

gemm_table() {  # one line per GEMM row of a cuda_bench.py JSON file
  python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    c = r.get('config', {})
    print(r['kernel'], c.get('bm'), c.get('bn'), c.get('bk'), c.get('stages'), c.get('threads'), c.get('options'),
          r.get('mma'), 'overlapped', r.get('overlapped'), 'err', r.get('rel_err'), 'ms', r.get('ms'),
          'x cublas', r.get('ratio_vs_cublas'), r.get('error', '')[:150])
" "$1"
}
case "${1:-tests}" in
  tests)
    timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE plugins/tile-cuda/tests tests/test_runtime_gpu.py \
      > "$OUT/pytest_gpu.txt" 2>&1
    tail -25 "$OUT/pytest_gpu.txt"
    timeout 240 python3 examples/run_all.py --target cuda > "$OUT/examples_cuda.txt" 2>&1
    tail -20 "$OUT/examples_cuda.txt"
    # a bundle built here by `tile conformance build-bundle cuda:sm_90a DIR`, with the digest it printed
    bundle=${BUNDLE:-.gpu/bundle}
    if [ -d "$bundle" ]; then
      timeout "${BUNDLE_TIMEOUT:-150}" python3 -m tilecore.cli conformance run-bundle "$bundle" \
        --expect-digest "${BUNDLE_DIGEST:?set BUNDLE_DIGEST to the digest build-bundle printed}" \
        --report "$OUT/conformance_cuda.json" > "$OUT/conformance_cuda.txt" 2>&1
      tail -8 "$OUT/conformance_cuda.txt"
    fi
    ;;
  launch)
    python3 -c "import torch, tile_cuda.launcher as L; print('torch', torch.__version__, 'fastcall', L._fastcall_module(), \
      [a for a in dir(torch.Tensor) if 'exchange' in a])" 2>&1 | tee "$OUT/fastcall.txt"
    timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE plugins/tile-cuda/tests/test_launcher.py \
      plugins/tile-cuda/tests/test_gpu.py tests/test_runtime_gpu.py tests/test_passes_output_coverage.py \
      > "$OUT/pytest_launch.txt" 2>&1
    tail -15 "$OUT/pytest_launch.txt"
    timeout 200 python3 benchmarks/cuda_bench.py --only "${2:-overhead}" --out "$OUT/cuda_bench_overhead.json" \
      > "$OUT/cuda_bench_overhead.log" 2>&1
    grep -v '^{' "$OUT/cuda_bench_overhead.log" | cut -c1-200 | tail -60
    ;;
  wgmma)
    timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE plugins/tile-cuda/tests/test_wgmma.py \
      tests/test_lowering_wgmma_plan.py > "$OUT/pytest_wgmma.txt" 2>&1
    tail -15 "$OUT/pytest_wgmma.txt"
    timeout 250 python3 benchmarks/cuda_bench.py --only "${2:-gemm_quickstart}" --out "$OUT/cuda_bench_gemm.json" \
      > "$OUT/cuda_bench_gemm.log" 2>&1
    gemm_table "$OUT/cuda_bench_gemm.json"
    ;;
  bench)
    timeout 560 python3 benchmarks/cuda_bench.py --only "${2:-overhead,softmax,layernorm,attention,gemm}" \
      --out "$OUT/cuda_bench.json" > "$OUT/cuda_bench.log" 2>&1
    grep -v '^{"gpu' "$OUT/cuda_bench.log" | cut -c1-260 | tail -60
    ;;
  overlap)
    # 8 workers: most of the time is nvcc, 2-3 s per kernel, about 160 kernels
    timeout 230 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE -k "overlap or test_gpu or test_wgmma_gemm_matches_torch" \
      plugins/tile-cuda/tests/test_wgmma.py plugins/tile-cuda/tests/test_wgmma_plan.py plugins/tile-cuda/tests/test_gpu.py \
      > "$OUT/pytest_overlap.txt" 2>&1
    tail -15 "$OUT/pytest_overlap.txt"
    timeout 300 python3 benchmarks/cuda_bench.py --only "${2:-gemm_overlap}" --out "$OUT/cuda_bench_overlap.json" \
      > "$OUT/cuda_bench_overlap.log" 2>&1
    gemm_table "$OUT/cuda_bench_overlap.json"
    ;;
  autotune)
    timeout 570 python3 benchmarks/autotune_h200.py --out "$OUT" > "$OUT/autotune_h200.log" 2>&1
    cut -c1-200 "$OUT/autotune_h200.log" | tail -40
    ;;
esac

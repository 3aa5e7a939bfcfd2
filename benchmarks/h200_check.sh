#!/usr/bin/env bash
# One H200 session's checks, run on the lent GPU host after staging TVM (see plugins/tile-cuda/README.md):
#   bash benchmarks/h200_check.sh tests   -> GPU tests, examples on cuda, conformance bundle (if present)
#   bash benchmarks/h200_check.sh bench [SECTIONS] -> benchmarks/cuda_bench.py
#   bash benchmarks/h200_check.sh autotune  -> benchmarks/autotune_h200.py (quickstart GEMM 8192^3, 108 configs)
# Logs and JSON go to $OUT (the device tool's result folder), else /tmp/h200.
set -u
OUT=${OUT:-/tmp/h200}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
case "${1:-tests}" in
  tests)
    timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE plugins/tile-cuda/tests tests/test_runtime_gpu.py \
      > "$OUT/pytest_gpu.txt" 2>&1
    tail -25 "$OUT/pytest_gpu.txt"
    timeout 240 python3 examples/run_all.py --target cuda > "$OUT/examples_cuda.txt" 2>&1
    tail -20 "$OUT/examples_cuda.txt"
    if [ -d .gpu/bundle2 ]; then
      timeout 120 python3 -m tilecore.cli conformance run-bundle .gpu/bundle2 --report "$OUT/conformance_cuda.json" \
        > "$OUT/conformance_cuda.txt" 2>&1
      tail -8 "$OUT/conformance_cuda.txt"
    fi
    ;;
  bench)
    timeout 560 python3 benchmarks/cuda_bench.py --only "${2:-overhead,softmax,layernorm,attention,gemm}" \
      --out "$OUT/cuda_bench.json" > "$OUT/cuda_bench.log" 2>&1
    grep -v '^{"gpu' "$OUT/cuda_bench.log" | cut -c1-260 | tail -60
    ;;
  autotune)
    timeout 570 python3 benchmarks/autotune_h200.py --out "$OUT" > "$OUT/autotune_h200.log" 2>&1
    cut -c1-200 "$OUT/autotune_h200.log" | tail -40
    ;;
esac

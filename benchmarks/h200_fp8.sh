#!/usr/bin/env bash
# fp8 on an H200 (issue 13): the fp8 GPU tests (every fp8 bit pattern's conversions, rounding into fp8 at its
# ties and thresholds, fp8 GEMMs, all against the reference interpreter) and the cuda conformance run at the
# execute tier (fp8 conversions and GEMMs are in the grammar for backends that declare fp8). At most ~300 s.
# PYTHONPATH=/tmp/site holds tilecore, tile-cuda, tile-cpu and tile-conformance installed from this tree.
# Logs and the conformance report go to $OUT, else /tmp/h200_fp8.
set -u
OUT=${OUT:-/tmp/h200_fp8}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
# 8 workers: most of the time is nvcc (24 kernels)
timeout 110 python3 -m pytest -n 8 -m gpu -q -p no:cacheprovider -rfE plugins/tile-cuda/tests/test_fp8.py \
  > "$OUT/pytest_fp8.txt" 2>&1
tail -25 "$OUT/pytest_fp8.txt"
timeout 175 python3 -m tilecore.cli conformance cuda --examples 120 --seed 19191 --no-progress --jobs 8 --max-shrinks 2 \
  --report "$OUT/conf.json" > "$OUT/conf.txt" 2>&1
tail -25 "$OUT/conf.txt"

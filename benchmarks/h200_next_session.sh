#!/usr/bin/env bash
# The H200 checks session 13 could not run (no device time), in the order they matter, for the next
# session's first device call after staging (`bash ../shared/gpu-host/stage.sh`, then the stage's
# part_aa copy, then a call that sources .gpu/b/install.sh). Run from the repository root with OUT
# set; each step writes its own file under $OUT and prints a one-line summary.
set -u
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-main ./ ./plugins/tile-cpu ./plugins/tile-cuda ./conformance >/tmp/pip-main.log 2>&1
echo "install rc $?"
export PYTHONPATH=/tmp/site:/tmp/site-main TILECORE_CACHE_DIR=/tmp/next-cache
{ git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/env.txt" 2>&1
# 1. session 12's one failing GPU test, alone, with its whole traceback
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu -rfE --tb=long plugins/tile-cuda/tests/test_timing.py > "$OUT/1_test_timing.txt" 2>&1
echo "test_timing rc $?"; tail -2 "$OUT/1_test_timing.txt"
# 2. every GPU test, nothing beside it
timeout 420 python3 -m pytest -q -p no:cacheprovider -m gpu -n 8 -rfE plugins/tile-cuda/tests tests/test_runtime_gpu.py > "$OUT/2_gpu_tests.txt" 2>&1
echo "gpu tests rc $?"; tail -2 "$OUT/2_gpu_tests.txt"
# 3. the quickstart GEMM with option ws_blocks_per_sm (session 13)
OUT="$OUT/3_quickstart" bash benchmarks/h200_s13_quickstart.sh

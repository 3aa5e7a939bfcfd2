#!/usr/bin/env bash
# The GPU checks session 14 left open, in the order they matter, for the next session's first
# device call after staging (`bash ../shared/gpu-host/stage.sh`, then the stage's part_aa copy, then
# a call that sources .gpu/b/install.sh). Run from the repository root with OUT set; each step
# writes its own file under $OUT and prints a one-line summary. About 5 minutes.
set -u
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-main ./ ./plugins/tile-cpu ./plugins/tile-cuda ./conformance >/tmp/pip-main.log 2>&1
echo "install rc $?"
export PYTHONPATH=/tmp/site:/tmp/site-main TILECORE_CACHE_DIR=/tmp/next-cache
{ git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/env.txt" 2>&1
# 1. each test of session 14's last call alone (one of them never finished there: which?), then
#    the int4 GEMM on the GPU (never run)
n=0
for t in plugins/tile-cuda/tests/test_gpu.py::test_while_loops_match_the_reference \
         plugins/tile-cuda/tests/test_timing.py \
         plugins/tile-cuda/tests/test_tma.py::test_tma_single_tile_gemm_first \
         tests/test_simt.py plugins/tile-cuda/tests/test_int4.py; do
  n=$((n + 1))
  timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=60 -m gpu -v -rfE \
    --tb=short "$t" > "$OUT/1_$n.txt" 2>&1
  echo "$t rc $?"; tail -1 "$OUT/1_$n.txt"
done
# 2. every GPU test, nothing beside it; a test that never ends is named with its stack
timeout 400 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=120 -m gpu -n 10 -v -rfE \
  plugins/tile-cuda/tests tests/test_runtime_gpu.py tests/test_simt.py > "$OUT/2_gpu_tests.txt" 2>&1
echo "gpu tests rc $?"; grep -E "FAILED|ERROR|Timeout" "$OUT/2_gpu_tests.txt" | head; tail -2 "$OUT/2_gpu_tests.txt"

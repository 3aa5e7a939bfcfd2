#!/usr/bin/env bash
# Session 14's H200 calls, one step list per call (STEPS), each step writing under $OUT:
#   install   tilecore and the plugins into /tmp/site-main (once per fresh machine)
#   timing    session 12's failing GPU test alone, with its whole traceback
#   gpu       every GPU test, nothing beside it (-v and a faulthandler timeout: a test that never ends
#             is named, with its stack)
#   gpuconf   every GPU test and, beside it, cuda conformance's execute tier at seed $SEED (100 programs)
#   quick     TileLang's quickstart GEMM: no WS / WS / WS with two blocks per SM (h200_s13_quickstart.sh)
#   fixed     the GPU tests fixed this session (while loop, timing, single-tile TMA) and the per-thread
#             kernels on the GPU (tests/test_simt.py), then the 2048^3 fp32 cpu GEMM at 16 threads
#             against numpy on the GPU host's CPU (issue 19), then the launch overhead rows
#   bars      issue 12's bar configurations with default options, ROUNDS rounds taking turns
# Run from the repository root after `source .gpu/b/install.sh` (see ../shared/gpu-host/stage.sh).
set -u
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:/tmp/site-main TILECORE_CACHE_DIR=/tmp/s14-cache
for step in ${STEPS:-install timing gpu}; do
  case $step in
  install)
    python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-main ./ ./plugins/tile-cpu ./plugins/tile-cuda ./conformance >/tmp/pip-main.log 2>&1
    echo "install rc $?"
    { git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
      python3 -c "import torch, tvm; print('torch', torch.__version__, 'tvm', tvm.__version__)"; } > "$OUT/env.txt" 2>&1
    cat "$OUT/env.txt";;
  timing)
    timeout ${TIMING_S:-150} python3 -m pytest -q -p no:cacheprovider -m gpu -rfE --tb=long plugins/tile-cuda/tests/test_timing.py > "$OUT/test_timing.txt" 2>&1
    echo "test_timing rc $?"; tail -3 "$OUT/test_timing.txt";;
  gpu)
    timeout ${GPU_S:-360} python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 -m gpu -n 8 -v -rfE --durations=15 plugins/tile-cuda/tests tests/test_runtime_gpu.py > "$OUT/gpu_tests.txt" 2>&1
    echo "gpu tests rc $?"; grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests.txt" | tail -15;;
  gpuconf)
    (timeout ${GPU_S:-330} python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 -m gpu -n 9 -v -rfE --durations=15 plugins/tile-cuda/tests tests/test_runtime_gpu.py > "$OUT/gpu_tests.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests.txt") &
    gpu=$!
    (TILECORE_CACHE_DIR=/tmp/s14-conf timeout ${GPU_S:-330} python3 -m tilecore.cli conformance cuda --examples 100 --seed ${SEED:-57575} --no-progress --jobs 6 --max-shrinks 2 --report "$OUT/conformance_cuda_seed${SEED:-57575}.json" > "$OUT/conformance.txt" 2>&1; echo "rc $?" >> "$OUT/conformance.txt") &
    conf=$!
    wait $gpu $conf
    grep -E "passed|failed|FAILED|ERROR|^rc" "$OUT/gpu_tests.txt" | tail -15; tail -6 "$OUT/conformance.txt";;
  fixed)
    timeout 150 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=60 -p no:benchmark -m gpu -n 4 -v -rfE --tb=short \
      plugins/tile-cuda/tests/test_gpu.py::test_while_loops_match_the_reference plugins/tile-cuda/tests/test_timing.py \
      plugins/tile-cuda/tests/test_tma.py::test_tma_single_tile_gemm_first tests/test_simt.py ${EXTRA_TESTS:-} > "$OUT/fixed_tests.txt" 2>&1
    echo "fixed tests rc $?"; tail -4 "$OUT/fixed_tests.txt"
    lscpu > "$OUT/lscpu.txt" 2>&1
    timeout 100 env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/cpu_vs_numpy.py --threads 16 --gemm-only --out "$OUT" > "$OUT/cpu16.txt" 2>&1
    echo "cpu 16 threads rc $?"; grep -iE "ratio|x numpy|gemm" "$OUT/cpu16.txt" | tail -10
    timeout 60 python3 benchmarks/cuda_bench.py --only overhead --out "$OUT/overhead.json" > "$OUT/overhead.txt" 2>&1
    echo "overhead rc $?"; tail -3 "$OUT/overhead.txt" | cut -c1-600;;
  quick)
    OUT="$OUT/quickstart" bash benchmarks/h200_s13_quickstart.sh;;
  bars)
    for round in $(seq ${ROUNDS:-3}); do
      for cfg in "gemm 4096 128 256 64 3 256 default float16" "gemm 8192 128 256 64 3 256 default float16" \
                 "gemm 4096 128 256 64 3 256 default bfloat16" "gemm 8192 128 256 64 3 256 default bfloat16" \
                 "gemm 4000 128 256 64 3 256 default float16" \
                 "attn 0 128 128 2 4096 4 32 float16 default" "attn 1 128 128 2 4096 4 32 float16 default"; do
        timeout 120 python3 benchmarks/cuda_ws_compare.py $cfg >> "$OUT/bars.jsonl" 2>> "$OUT/bars.err"
        echo "round $round $cfg rc $?"
      done
    done
    python3 benchmarks/jsonl_table.py "$OUT/bars.jsonl" _vs_cublas _vs_cudnn _rel_err tflops | tee "$OUT/bars_table.txt"
    ;;
  esac
done

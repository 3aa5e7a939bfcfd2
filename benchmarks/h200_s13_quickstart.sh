#!/usr/bin/env bash
# TileLang's quickstart GEMM (128x128 tiles, 128 threads) on the H200: no warp specialization (the
# default), warp-specialized, and warp-specialized planned for two blocks per SM (option
# ws_blocks_per_sm=2, session 13, not measured yet), each checked against torch and timed next to
# cuBLAS in one process; then the GPU tests of that option. Run from the repository root with
# tilecore and the plugins installed (PYTHONPATH), OUT set to the results folder.
set -u
mkdir -p "$OUT"
for cfg in "8192 128 128 32 3 128" "4096 128 128 32 3 128" "8192 128 128 64 3 128" "8192 128 128 32 4 128"; do
  timeout 100 python3 benchmarks/cuda_ws_compare.py gemm $cfg per_sm >> "$OUT/quickstart.jsonl" 2>> "$OUT/quickstart.err"
  echo "gemm $cfg rc $?"
done
python3 benchmarks/jsonl_table.py "$OUT/quickstart.jsonl" _vs_cublas _rel_err | tee "$OUT/quickstart_table.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu -rfE plugins/tile-cuda/tests/test_warp_specialize.py -k "two_blocks" > "$OUT/pytest_two_blocks.txt" 2>&1
tail -3 "$OUT/pytest_two_blocks.txt"

# final run of merged main: GPU tests, cuda conformance at a fresh seed, the decode/ragged GEMM bench
export PYTHONPATH=/tmp/site TILECORE_CACHE_DIR=/tmp/s11final
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
cat .gpu/s11/TREE > $OUT/tree.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu -n 8 -rfE plugins/tile-cuda/tests tests/test_runtime_gpu.py > $OUT/pytest_gpu.txt 2>&1; echo "rc $?" >> $OUT/pytest_gpu.txt
tail -12 $OUT/pytest_gpu.txt
timeout 170 python3 -m tilecore.cli conformance cuda --examples 100 --seed 29292 --no-progress --jobs 8 --max-shrinks 2 --report $OUT/conformance_cuda_seed29292.json > $OUT/conformance.txt 2>&1; echo "rc $?" >> $OUT/conformance.txt
tail -8 $OUT/conformance.txt
if [ -n "${BENCH:-}" ]; then
  timeout 100 python3 benchmarks/cuda_bench.py --only gemm_decode > $OUT/decode.jsonl 2> $OUT/decode.err; echo "decode rc $?"
  grep -h '"ratio_vs_cublas"' $OUT/decode.jsonl | python3 -c "import sys,json; [print(r.get('kernel'), r.get('config'), r.get('split_k'), r.get('splits'), round(r['ratio_vs_cublas'],3)) for r in map(json.loads, sys.stdin)]"
fi
if [ -n "${GEMM:-}" ]; then
  for n in 4096 8192; do timeout 45 python3 benchmarks/cuda_ws_compare.py gemm $n 128 256 64 3 256 tma >> $OUT/gemm.jsonl 2>> $OUT/gemm.err; echo "gemm $n rc $?"; done
  timeout 45 python3 benchmarks/cuda_ws_compare.py gemm 4000 128 256 64 3 256 tma >> $OUT/gemm.jsonl 2>> $OUT/gemm.err; echo "gemm 4000 rc $?"
  python3 -c "
import json
for l in open('$OUT/gemm.jsonl'):
    r=json.loads(l); print(r['n'], r['cfg'], {k: round(v,3) for k,v in r.items() if k.endswith(('_vs_cublas','_tflops','_rel_err'))})"
fi

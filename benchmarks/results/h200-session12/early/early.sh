# session 12, early call: the cuda execute tier's 12 failing programs of seed 29292 rerun with the fp8 transfer fix (dccfd2b),
# bf16 GEMM and attention (both causal modes) against cuBLAS / cuDNN in the same process.
export NAME=s12early OUT=$OUT
source benchmarks/h200_env.sh
git log -1 --format=%H > $OUT/tree.txt 2>/dev/null || cat .gpu/s12/TREE > $OUT/tree.txt
timeout 200 python3 -m tilecore.cli conformance rerun benchmarks/results/h200-session11/final/conformance_cuda_seed29292.json --jobs 14 --report $OUT/rerun_cuda_seed29292.json > $OUT/conformance.txt 2>&1; echo "rc $?" >> $OUT/conformance.txt
tail -8 $OUT/conformance.txt
for dt in bfloat16; do for n in 4096 8192; do timeout 60 python3 benchmarks/cuda_ws_compare.py gemm $n 128 256 64 3 256 tma $dt >> $OUT/gemm.jsonl 2>> $OUT/gemm.err; echo "gemm $dt $n rc $?"; done; done
for causal in 0 1; do timeout 80 python3 benchmarks/cuda_ws_compare.py attn $causal 128 128 2 4096 4 32 float16 tma >> $OUT/attn.jsonl 2>> $OUT/attn.err; echo "attn $causal rc $?"; done
python3 -c "
import json
for f in ('gemm','attn'):
  try:
    for l in open('$OUT/'+f+'.jsonl'):
      r=json.loads(l); print({k: (round(v,3) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith('_ms')})
  except OSError as e: print(e)"

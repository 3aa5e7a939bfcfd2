set -u
export PYTHONPATH=/tmp/site
mkdir -p $OUT/final
cd $OUT/final && timeout 300 python3 -m tilecore.cli conformance cuda --examples 120 --seed 16161 --report $OUT/final/conformance_cuda_seed16161.json > $OUT/final/conformance_cuda_seed16161.txt 2>&1; cd - >/dev/null
head -2 $OUT/final/conformance_cuda_seed16161.txt; grep verdict $OUT/final/conformance_cuda_seed16161.txt
for args in "attn 0 128 128 2 4096 4 32 float16 t" "attn 1 128 128 2 4096 4 32 float16 t" "gemm 8192 128 256 64 3 256 t" "gemm 4096 128 256 64 3 256 t"; do
  timeout 90 python3 benchmarks/cuda_ws_compare.py $args >> $OUT/final/bench.jsonl 2>>$OUT/final/bench.err || echo "FAILED $args" >> $OUT/final/bench.jsonl
done
cat $OUT/final/bench.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    if not l.startswith('{'): print(l.strip()); continue
    d=json.loads(l); print(d['kind'], d.get('cfg'), d.get('causal',''), 'ws', round(d.get('ws_ms',0),3), 'base', round(d.get('base_ms',0),3), 'err', d.get('ws_rel_err'), 'vs peer', d.get('ws_vs_cublas', d.get('ws_vs_cudnn')), d.get('base_vs_cublas', d.get('base_vs_cudnn')))"

# session 12, third mid call: attention with uniform masks + heavy-first blocks (main 34555df), softmax/layernorm bars
set -u
rm -rf /tmp/site-main
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-main ./ ./plugins/tile-cpu ./plugins/tile-cuda ./conformance >/tmp/pip-main.log 2>&1; echo "install rc $?"
export PYTHONPATH=/tmp/site:/tmp/site-main TILECORE_CACHE_DIR=/tmp/s12main3
mkdir -p $OUT
for cfg in "1 128 128 2" "0 128 128 2"; do timeout 90 python3 benchmarks/cuda_ws_compare.py attn $cfg 4096 4 32 float16 defer >> $OUT/attn.jsonl 2>> $OUT/attn.err; echo "attn $cfg rc $?"; done
python3 -c "
import json
for l in open('$OUT/attn.jsonl'):
    r=json.loads(l); print({k: (round(v,3) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith(('_ms','_compile_s','_is_ws','_tma_maps'))})"
timeout 100 python3 benchmarks/cuda_bench.py --only softmax,layernorm --out $OUT/bench_sm_ln.json > $OUT/bench_sm_ln.txt 2>&1; echo "bench rc $?"
tail -15 $OUT/bench_sm_ln.txt

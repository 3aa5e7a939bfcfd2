# session 12, second mid call: persistent / TMA-store GEMMs (helper tree), deferred attention (main)
set -u
for t in main:. persist:.gpu/s12-persist; do
  n=${t%%:*}; d=${t#*:}
  rm -rf /tmp/site-$n
  (cd $d && python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-$n ./ ./plugins/tile-cpu ./plugins/tile-cuda ./conformance >/tmp/pip-$n.log 2>&1; echo "install $n rc $?")
done
mkdir -p $OUT/persist $OUT/main
(cd .gpu/s12-persist && PYTHONPATH=/tmp/site-persist OUT=$OUT/persist timeout 300 bash benchmarks/h200_s12_persist.sh > $OUT/persist/stdout.txt 2>&1; echo "persist rc $?")
tail -20 $OUT/persist/stdout.txt
export PYTHONPATH=/tmp/site:/tmp/site-main TILECORE_CACHE_DIR=/tmp/s12main2
timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu -n 6 -rfE plugins/tile-cuda/tests/test_ws_deferred.py > $OUT/main/pytest_deferred.txt 2>&1; echo "rc $?" >> $OUT/main/pytest_deferred.txt
tail -3 $OUT/main/pytest_deferred.txt
for cfg in "0 128 128 2" "1 128 128 2"; do timeout 80 python3 benchmarks/cuda_ws_compare.py attn $cfg 4096 4 32 float16 defer >> $OUT/main/attn.jsonl 2>> $OUT/main/attn.err; echo "attn $cfg rc $?"; done
python3 -c "
import json
for l in open('$OUT/main/attn.jsonl'):
    r=json.loads(l); print({k: (round(v,3) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith(('_ms','_compile_s','_is_ws','_tma_maps'))})"

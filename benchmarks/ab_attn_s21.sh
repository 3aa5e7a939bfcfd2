export PYTHONPATH=$PWD:$PWD/plugins/tile-cuda
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $OUT/env.txt
python3 -c "import torch;print(torch.__version__)" >> $OUT/env.txt
python3 benchmarks/cuda_prebuilt.py run .prebuilt ${ROUNDS:-7} > $OUT/a.jsonl 2> $OUT/a.err
mkdir -p /tmp/pb2 && for f in .prebuilt/*.pkl; do b=$(basename $f); case $b in old-*) p=a;; mid-*) p=b;; *) p=c;; esac; cp $f /tmp/pb2/$p-$b; done
python3 benchmarks/cuda_prebuilt.py run /tmp/pb2 ${ROUNDS:-7} > $OUT/b.jsonl 2>> $OUT/a.err
cat $OUT/env.txt; tail -3 $OUT/a.err
python3 - <<'PY'
import json,statistics as st,collections,os
O=os.environ['OUT']
for f in ('a','b'):
  d=collections.defaultdict(list)
  for l in open(O+'/'+f+'.jsonl'):
    r=json.loads(l)
    if 'vs_peer' in r: d[r['tag']+'-'+r['name']].append((r['vs_peer'],r['ms'],r['rel_err']))
    elif 'name' in r: print('ERR',r)
  for k,v in sorted(d.items()): print(f,k,'median x',round(st.median(x[0] for x in v),4),'ms',round(st.median(x[1] for x in v),4),'min',round(min(x[1] for x in v),4),'err',round(max(x[2] for x in v),6))
PY

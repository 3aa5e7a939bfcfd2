#!/usr/bin/env bash
# session 11, call B: stage-count sweep of TileLang's quickstart GEMM (main's tree, /tmp/site)
set -u
OUT=${OUT:-/tmp/s11b}; mkdir -p "$OUT/stages"
export PYTHONPATH=/tmp/site TILECORE_CACHE_DIR=/tmp/s11cache
run() { timeout "$1" python3 benchmarks/cuda_ws_compare.py "${@:2}" >> "$OUT/stages/timing.jsonl" 2>> "$OUT/stages/timing.err"; echo "timing ${*:2}: rc=$?"; }
for s in 4 6 8; do run 40 gemm 8192 128 128 32 $s 128 tma; done
python3 - "$OUT/stages/timing.jsonl" <<'PY' | tee "$OUT/stages/table.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    keys = [k for k in r if k.endswith(("_vs_cublas", "_tflops"))]
    print(r["kind"], r.get("n"), r["cfg"], " ".join(f"{k}={r[k]:.3g}" for k in keys), "max_err=%.2g" % max(r[k] for k in r if k.endswith("_rel_err")))
PY
tail -3 "$OUT/stages/timing.err"

# Sourced by the H200 scripts (benchmarks/h200_*.sh) with NAME set: the output folder $OUT (default
# /tmp/$NAME), tilecore installed under /tmp/site first on PYTHONPATH, a private compile cache, and
# $OUT/env.txt (date, commit, GPU and driver, torch / CUDA / TVM versions).
OUT=${OUT:-/tmp/$NAME}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export TILECORE_CACHE_DIR=${TILECORE_CACHE_DIR:-/tmp/${NAME}_cache}
{
  date -u
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, tvm; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'tvm', tvm.__version__)"
} > "$OUT/env.txt" 2>&1

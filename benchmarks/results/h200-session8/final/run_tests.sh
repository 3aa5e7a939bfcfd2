set -u
export PYTHONPATH=/tmp/site
mkdir -p $OUT/final
git log --oneline -1 > $OUT/final/tree.txt 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/final/gpu.txt 2>&1
timeout 220 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 8 plugins/tile-cuda/tests tests/test_runtime_gpu.py > $OUT/final/pytest_gpu.txt 2>&1
tail -4 $OUT/final/pytest_gpu.txt
timeout 150 python3 examples/run_all.py --target cuda > $OUT/final/examples_cuda.txt 2>&1
tail -2 $OUT/final/examples_cuda.txt

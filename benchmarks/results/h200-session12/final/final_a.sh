# session 12, final call A: the GPU tests and the cuda conformance execute tier at a fresh seed, concurrently
set -u
rm -rf /tmp/site-main
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-main ./ ./plugins/tile-cpu ./plugins/tile-cuda ./conformance >/tmp/pip-main.log 2>&1; echo "install rc $?"
export PYTHONPATH=/tmp/site:/tmp/site-main
mkdir -p $OUT
cat .gpu/s12/TREE > $OUT/tree.txt
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
(TILECORE_CACHE_DIR=/tmp/s12fa timeout 330 python3 -m pytest -q -p no:cacheprovider -m gpu -n 9 -rfE plugins/tile-cuda/tests tests/test_runtime_gpu.py > $OUT/pytest_gpu.txt 2>&1; echo "rc $?" >> $OUT/pytest_gpu.txt) &
P1=$!
(TILECORE_CACHE_DIR=/tmp/s12fc timeout 330 python3 -m tilecore.cli conformance cuda --examples 100 --seed 31331 --no-progress --jobs 6 --max-shrinks 2 --report $OUT/conformance_cuda_seed31331.json > $OUT/conformance.txt 2>&1; echo "rc $?" >> $OUT/conformance.txt) &
P2=$!
wait $P1 $P2
tail -6 $OUT/pytest_gpu.txt
tail -6 $OUT/conformance.txt

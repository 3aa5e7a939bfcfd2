# session 17, second GPU call: stage TVM, GPU tests of the worktree (FENCE flag), then of the in-flight tree, then cuda conformance
source .gpu/b/install.sh
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site ./ ./plugins/tile-cuda ./conformance > $OUT/pip.txt 2>&1; echo "pip rc $?"
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
T="plugins/tile-cuda/tests/test_cluster.py plugins/tile-cuda/tests/test_warp_specialize.py plugins/tile-cuda/tests/test_ws_deferred.py plugins/tile-cuda/tests/test_tma.py plugins/tile-cuda/tests/test_persistent.py"
timeout ${NEW_S:-170} python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=60 -m gpu -n 8 -v -rfE $T > $OUT/tests_new.txt 2>&1
echo "new tests rc $?"; grep -E "passed|failed" $OUT/tests_new.txt | tail -3
cp /tmp/site/tile_cuda/_fastcall*.so inflight/plugins/tile-cuda/tile_cuda/ 2>/dev/null
TI=$(echo $T | sed 's#plugins/#inflight/plugins/#g')
PYTHONPATH=$PWD/inflight/plugins/tile-cuda:/tmp/site timeout ${INFLIGHT_S:-150} python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=60 -m gpu -n 8 -v -rfE $TI > $OUT/tests_inflight.txt 2>&1
echo "inflight tests rc $?"; grep -E "passed|failed" $OUT/tests_inflight.txt | tail -3
PYTHONPATH=$PWD/inflight/plugins/tile-cuda:/tmp/site python3 -c "import tile_cuda; print(tile_cuda.__file__)"
timeout ${CONF_S:-120} python3 -m tilecore.cli conformance cuda --tier execute --examples 110 --seed ${SEED:-69698} --no-progress --jobs 8 --report $OUT/conformance_cuda.json > $OUT/conformance.txt 2>&1
echo "conformance rc $?"; tail -4 $OUT/conformance.txt

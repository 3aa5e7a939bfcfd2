source .gpu/b/install.sh
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site ./ ./plugins/tile-cuda ./conformance > $OUT/pip.txt 2>&1; echo "pip rc $?"
export PYTHONPATH=/tmp/site
T="plugins/tile-cuda/tests/test_cluster.py plugins/tile-cuda/tests/test_warp_specialize.py plugins/tile-cuda/tests/test_ws_deferred.py plugins/tile-cuda/tests/test_tma.py plugins/tile-cuda/tests/test_persistent.py"
timeout ${NEW_S:-140} python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=60 -m gpu -n 8 -v -rfE $T > $OUT/tests.txt 2>&1
echo "tests rc $?"; grep -E "passed|failed|FAILED|ERROR" $OUT/tests.txt | tail -8
timeout ${CONF_S:-80} python3 -m tilecore.cli conformance cuda --tier execute --examples 110 --seed ${SEED:-69698} --no-progress --jobs 8 --report $OUT/conformance_cuda.json > $OUT/conformance.txt 2>&1
echo "conformance rc $?"; tail -4 $OUT/conformance.txt

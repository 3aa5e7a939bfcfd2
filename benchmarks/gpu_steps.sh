#!/usr/bin/env bash
# The GPU calls of sessions 15-16 (was gpu_s15.sh), one step list per call (STEPS), each step writing
# under $OUT. Run from the repository root after the stage's install (`source .gpu/b/install.sh`), OUT set.
#   install   tilecore, tile-cpu, tile-cuda and conformance into /tmp/site-main; with old/plugins/tile-cuda
#             in the tree (`git archive REV plugins/tile-cuda | tar -x -C old`), that tile-cuda into
#             /tmp/site-old for step bars' A/B
#   bars      issue 12's bar configurations with default options (cuda_ws_compare.py "default"), ROUNDS
#             rounds, each row run with the tree's tile-cuda ("new") and, where installed, old/'s ("old")
#             in turn, in separate processes
#   check     each GPU test session 14 fixed, alone (one never finished there: which?), the int4 GEMM
#             and the TMA-multicast tests (tile_cuda/cluster.py), each with -v and a stack dump at 60 s
#   mc        TMA multicast timed: TileLang's quickstart GEMM and the bar GEMM / attention configs,
#             default build next to clusters of two (cuda_ws_compare.py mode "mc"), ROUNDS rounds
#   rest      the other bars of issue 12 with default options: softmax and layernorm against copy
#             bandwidth, the decode GEMM 16x8192x8192, host time per call (cuda_bench.py)
#   mcprof    where the TMA-multicast build waits (session 15: 3-6x slower): ncu --set full of the
#             4096^3 quickstart cluster build, then its SASS lines with the most stall samples
#   conf      cuda conformance, execute tier, a fresh seed (SEED), 110 programs, CONF_OPTS passed on
#   gpu       every GPU test, -n 10, -v; a test that runs past TEST_TIMEOUT (150 s) ends its worker and is
#             reported, the others go on
#   cpu16     issue 19 on the GPU host's CPU: lscpu, then the 2048^3 fp32 GEMM at the issue's tile sizes
#             against numpy, both at 16 threads (cpu_vs_numpy.py --gemm-only)
#   prebuilt  builds compiled elsewhere (benchmarks/cuda_prebuilt.py build .prebuilt ...): cuda_power.py on
#             those matching POWER_GLOB (sustained load, power, SM clock), then ROUNDS rounds of all of them
#             next to the peer (cuda_prebuilt.py run), within PB_LIMIT seconds each
#   cpuvar    issue 19: schedules of the 2048^3 fp32 whole-grid GEMM at 16 threads in interleaved rounds
#             (cpu_gemm_blocking.py --variants CPU_VARIANTS, CPU_ROUNDS rounds), each call next to numpy's
set -u
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:/tmp/site-main TILECORE_CACHE_DIR=${TILECORE_CACHE_DIR:-/tmp/tc-cache}
for step in ${STEPS:-install check}; do
  case $step in
  install)
    python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-main ./ ./plugins/tile-cpu \
      ./plugins/tile-cuda ./conformance > /tmp/pip-main.log 2>&1
    echo "install rc $?"
    if [ -d old/plugins/tile-cuda ]; then
      python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/site-old ./old/plugins/tile-cuda > /tmp/pip-old.log 2>&1
      echo "install old tile-cuda rc $?"
    fi
    { git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/env.txt" 2>&1;;
  check)
    n=0
    for t in ${CHECK_TESTS:-plugins/tile-cuda/tests/test_cluster.py plugins/tile-cuda/tests/test_gpu.py::test_while_loops_match_the_reference \
             plugins/tile-cuda/tests/test_timing.py plugins/tile-cuda/tests/test_tma.py::test_tma_single_tile_gemm_first \
             tests/test_simt.py plugins/tile-cuda/tests/test_int4.py}; do
      n=$((n + 1))
      timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=60 -m gpu -v -rfE \
        --tb=short "$t" > "$OUT/check_$n.txt" 2>&1
      echo "$t rc $?"; grep -E "PASSED|FAILED|ERROR|Timeout" "$OUT/check_$n.txt" | cut -c1-160 | head -12; tail -1 "$OUT/check_$n.txt"
    done;;
  mc)
    for round in $(seq ${ROUNDS:-1}); do
      # MC_CFGS: configurations separated by ";" (default: the five below)
      IFS=';' read -ra cfgs <<< "${MC_CFGS:-gemm 8192 128 128 32 3 128 mc float16;gemm 8192 128 128 32 6 128 mc float16;gemm 4096 128 128 32 3 128 mc float16;gemm 8192 128 256 64 3 256 mc float16;gemm 4096 128 256 64 3 256 mc float16;attn 0 128 128 2 4096 4 32 float16 mc}"
      for cfg in "${cfgs[@]}"; do
        timeout 150 python3 benchmarks/cuda_ws_compare.py $cfg >> "$OUT/mc.jsonl" 2>> "$OUT/mc.err"
        echo "round $round $cfg rc $?"
      done
    done
    python3 benchmarks/jsonl_table.py "$OUT/mc.jsonl" _vs_cublas _vs_cudnn _rel_err _clusters same_bits | tee "$OUT/mc_table.txt"
    tail -5 "$OUT/mc.err";;
  bars)
    for round in $(seq ${ROUNDS:-1}); do
      IFS=';' read -ra cfgs <<< "${BAR_CFGS:-gemm 4096 128 256 64 3 256 default float16;gemm 8192 128 256 64 3 256 default float16;gemm 4096 128 256 64 3 256 default bfloat16;gemm 8192 128 256 64 3 256 default bfloat16;gemm 4000 128 256 64 3 256 default float16;gemm 8192 128 128 32 3 128 default float16;attn 0 128 128 2 4096 4 32 float16 default;attn 1 128 128 2 4096 4 32 float16 default}"
      for cfg in "${cfgs[@]}"; do
        for tree in new old; do
          site=/tmp/site-main; [ $tree = old ] && { [ -d /tmp/site-old ] || continue; site=/tmp/site-old:/tmp/site-main; }
          PYTHONPATH=/tmp/site:$site TILECORE_CACHE_DIR=$TILECORE_CACHE_DIR-$tree timeout 150 python3 benchmarks/cuda_ws_compare.py $cfg \
            | sed "s/^{/{\"tree\": \"$tree\", /" >> "$OUT/bars.jsonl" 2>> "$OUT/bars.err"
          echo "round $round $tree $cfg rc $?"
        done
      done
    done
    python3 benchmarks/jsonl_table.py "$OUT/bars.jsonl" _vs_cublas _vs_cudnn _rel_err | tee "$OUT/bars_table.txt"
    tail -5 "$OUT/bars.err";;
  rest)
    timeout ${REST_LIMIT:-400} python3 benchmarks/cuda_bench.py --only overhead,softmax,layernorm,gemm_decode_auto --out "$OUT/rest.json" \
      > "$OUT/rest.txt" 2>&1
    echo "rest rc $?"; grep -v '^{"gpu"' "$OUT/rest.txt" | cut -c1-400 | tail -14;;
  mcprof)
    MC=1 N=4096 timeout 240 ncu --clock-control none --set full --import-source no -o "$OUT/mc_full" --launch-skip 1 --launch-count 1 \
      -k regex:gemm python3 benchmarks/results/h100-session15/mc_profile.py > "$OUT/mcprof.txt" 2>&1
    echo "ncu rc $?"
    ncu -i "$OUT/mc_full.ncu-rep" --page source --csv --print-source sass > "$OUT/mc_sass.csv" 2>&1
    python3 - "$OUT/mc_sass.csv" <<'PY' | tee "$OUT/mc_stalls.txt"
import csv, sys
rows = list(csv.reader(line for line in open(sys.argv[1]) if line.startswith('"')))
head, body = rows[0], rows[1:]
col = next((i for i, h in enumerate(head) if "Stall Sampling (All" in h), None)
src = next((i for i, h in enumerate(head) if h.strip() in ("Source", "SASS")), 1)
if col is None:
    print("no stall-sampling column:", head[:12])
else:
    num = lambda r: float((r[col] or "0").replace(",", "") or 0)
    for r in sorted(body, key=num, reverse=True)[:30]:
        print(f"{num(r):10.0f}  {r[src][:110]}")
PY
    ;;
  conf)
    # CONF_OPTS: more conformance arguments, e.g. "--option retile_gemm=true"
    timeout ${CONF_LIMIT:-400} python3 -m tilecore.cli conformance cuda --tier execute --examples 110 --seed ${SEED:-59595} \
      --no-progress --jobs 8 ${CONF_OPTS:-} --report "$OUT/conformance_cuda_${SEED:-59595}.json" > "$OUT/conformance_${SEED:-59595}.txt" 2>&1
    echo "conformance rc $?"; tail -8 "$OUT/conformance_${SEED:-59595}.txt";;
  gpu)
    # --timeout-method=thread: a kernel that never ends blocks in the driver, where a signal cannot stop it;
    # the thread method ends the worker (xdist reports it and starts another), so the other tests still run
    timeout ${GPU_LIMIT:-400} python3 -m pytest -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=120 -m gpu -n 10 -v -rfE \
      --timeout=${TEST_TIMEOUT:-150} --timeout-method=thread \
      plugins/tile-cuda/tests tests/test_runtime_gpu.py tests/test_simt.py > "$OUT/gpu_tests.txt" 2>&1
    echo "gpu tests rc $?"; grep -E "FAILED|ERROR|Timeout" "$OUT/gpu_tests.txt" | head; tail -2 "$OUT/gpu_tests.txt";;
  cpu16)
    lscpu > "$OUT/lscpu.txt" 2>&1
    timeout ${CPU_LIMIT:-150} env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/cpu_vs_numpy.py --threads 16 --repeat ${CPU_REPEAT:-15} \
      --gemm-only --out "$OUT" > "$OUT/cpu16.txt" 2>&1
    echo "cpu 16 threads rc $?"; grep -iE "ratio|x numpy|gemm" "$OUT/cpu16.txt" | cut -c1-300 | tail -12;;
  prebuilt)
    timeout ${PB_LIMIT:-200} python3 benchmarks/cuda_power.py .prebuilt 2.5 \
      "${POWER_GLOB:-new-*8192*}" > "$OUT/power.jsonl" 2> "$OUT/power.err"
    echo "power rc $?"; tail -2 "$OUT/power.err"
    timeout ${PB_LIMIT:-200} python3 benchmarks/cuda_prebuilt.py run .prebuilt ${ROUNDS:-5} 'new-*' > "$OUT/prebuilt.jsonl" 2>&1
    echo "prebuilt rc $?"
    python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
for line in open(f"{out}/power.jsonl"):
    r = json.loads(line)
    if "name" in r:
        print(f"power {r['name']:24} {r['n']} cold {r['cold_ms']:.3f} ms sustained {r['sustained_ms']:.3f} ms "
              f"{r['watts']:.0f} W {r['sm_mhz']:.0f} MHz")
rows = {}
for line in open(f"{out}/prebuilt.jsonl"):
    r = json.loads(line)
    if "name" in r:
        rows.setdefault((r["name"], r["n"]), []).append(r.get("vs_peer", 0.0))
for (name, n), v in sorted(rows.items()):
    print(f"{name:24} {n:5} median {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f}) x peer, {len(v)} rounds")
PY
    ;;
  cpuvar)
    timeout ${CPU_LIMIT:-150} env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/cpu_gemm_blocking.py --size 2048 \
      --threads 16 --rounds ${CPU_ROUNDS:-9} --variants "${CPU_VARIANTS:-base;dyn=0;dyn=2;dyn=0,whole=1;dyn=0,sync=barrier}" \
      --out "$OUT" > "$OUT/cpuvar.txt" 2>&1
    echo "cpu variants rc $?"; grep -E "ratio|Error" "$OUT/cpuvar.txt" | cut -c1-200 | tail -8;;
  esac
done

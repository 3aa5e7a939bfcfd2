#!/usr/bin/env bash
# One GPU call, no staged TVM: time the builds of benchmarks/cuda_prebuilt.py (DIR, default .prebuilt,
# carried to the GPU host), then ncu's speed-of-light and warp-state sections of the builds named in
# NCU (file-name globs, ";"-separated). Run from the repository root with OUT set.
set -u
dir=${DIR:-.prebuilt}
export PYTHONPATH=$PWD:$PWD/plugins/tile-cuda
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout ${PLAIN_S:-240} python3 benchmarks/cuda_prebuilt.py run "$dir" ${ROUNDS:-2} '!*_mc*' > "$OUT/plain.jsonl" 2> "$OUT/plain.err"
echo "plain rc $?"
# one process per cluster build: a build that hangs (a handshake that never completes) costs its own
# MC_EACH_S seconds, not the rest of the cluster rows
: > "$OUT/mc.jsonl"; : > "$OUT/mc.err"
for f in $(cd "$dir" && ls *_mc*.pkl); do
  timeout ${MC_EACH_S:-30} python3 benchmarks/cuda_prebuilt.py run "$dir" 1 "${f%.pkl}" 2>> "$OUT/mc.err" | grep -v '"builds"' >> "$OUT/mc.jsonl"
  rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || echo "mc $f rc $rc"
done
tail -3 "$OUT/plain.err" "$OUT/mc.err"
cat "$OUT/plain.jsonl" "$OUT/mc.jsonl" > "$OUT/all.jsonl"
python3 benchmarks/jsonl_table.py "$OUT/all.jsonl" tag name round rel_err vs_peer ms error | tee "$OUT/table.txt"
IFS=';' read -ra profiles <<< "${NCU:-}"
for i in "${!profiles[@]}"; do
  timeout ${NCU_S:-90} ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    -k regex:"^(gemm_kernel|main_kernel)$" --launch-skip 2 --launch-count 1 python3 benchmarks/cuda_prebuilt.py run "$dir" 1 "${profiles[$i]}" \
    > "$OUT/ncu_$i.txt" 2>&1
  echo "ncu ${profiles[$i]} rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Warp Cycles Per Issued|Memory Throughput" "$OUT/ncu_$i.txt" | head -8
done

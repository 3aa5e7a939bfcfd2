# session 22's one-call GPU check without TVM: the persistent attention cases (bits, accuracy, built
# with the staging-tile swizzle on), the A/B timing (ROUNDS rounds in two orders: old- = session 20,
# new- = session 21, epi- = session 22's code), then ncu's warp-state and shared-memory tables of
# session 21's and 22's non-causal attention while NCU_S seconds are left
export PYTHONPATH=$PWD:$PWD/plugins/tile-cuda
python3 benchmarks/persistent_attention_check.py run .prebuilt/check > $OUT/check.jsonl 2> $OUT/check.err
cat $OUT/check.jsonl; tail -3 $OUT/check.err
ROUNDS=${ROUNDS:-4} bash benchmarks/ab_attn_s21.sh
[ "${NCU_S:-60}" = 0 ] || for b in new-attn-4096 epi-attn-4096; do
  timeout ${NCU_S:-60} ncu --clock-control none --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
    -k regex:"^main_kernel$" --launch-skip 2 --launch-count 1 python3 benchmarks/cuda_prebuilt.py run .prebuilt 1 $b > $OUT/ncu_$b.txt 2>&1
  echo "ncu $b rc $?"; grep -E "Duration|Warp Cycles|Bank|Stall" $OUT/ncu_$b.txt | head -12
done

# session 21's one-call GPU check without TVM: the persistent attention cases (bits, accuracy), then the A/B timing
export PYTHONPATH=$PWD:$PWD/plugins/tile-cuda
python3 benchmarks/persistent_attention_check.py run .prebuilt/check > $OUT/check.jsonl 2> $OUT/check.err
cat $OUT/check.jsonl; tail -3 $OUT/check.err
ROUNDS=${ROUNDS:-9} bash benchmarks/ab_attn_s21.sh

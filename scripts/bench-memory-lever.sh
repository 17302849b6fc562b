#!/usr/bin/env bash
# A memory lever beside the same job without it, in the same sitting: `bench train` alternating
# the two REPEATS times per shape; prints each run's median step, tokens/s and peak RSS (rank 0,
# activations included), then the medians and the ratios lever / without. Shared, noisy
# machine: read the ratios, and run it twice.
#   scripts/bench-memory-lever.sh recompute|classifier [STEPS] [REPEATS]
#     recompute   model.recompute: true against false
#     classifier  model.classifier_chunk_tokens: 512 against 0 (the whole micro-batch), at
#                 GPT-2's vocabulary
set -euo pipefail
cd "$(dirname "$0")/.."
lever=${1:?usage: scripts/bench-memory-lever.sh recompute|classifier [STEPS] [REPEATS]}
steps=${2:-4}
repeats=${3:-3}
bin=build/ringmaster

# name | overrides (1 rank, the machine's threads)
case $lever in
  recompute)
    key=model.recompute off=false on=true
    shapes=(
      "L4 C256 T256 B8|--set model.layers=4 --set model.width=256 --set model.heads=4 --set model.seq_len=256 --set train.micro_batch=8 --set train.global_batch=8"
      "L6 C128 T1024 B4|--set model.layers=6 --set model.width=128 --set model.heads=4 --set model.seq_len=1024 --set train.micro_batch=4 --set train.global_batch=4"
    ) ;;
  classifier)
    key=model.classifier_chunk_tokens off=0 on=512
    shapes=(
      "V50257 L2 C256 T256 B8|--set model.vocab_size=50257 --set model.layers=2 --set model.width=256 --set model.heads=4 --set model.seq_len=256 --set train.micro_batch=8 --set train.global_batch=8"
    ) ;;
  *) echo "bench-memory-lever: unknown lever '$lever' (recompute or classifier)" >&2; exit 2 ;;
esac
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
for spec in "${shapes[@]}"; do
  IFS='|' read -r name sets <<<"$spec"
  declare -A ms=() tok=() rss=()
  for ((i = 1; i <= repeats; i++)); do
    for value in "$off" "$on"; do
      # shellcheck disable=SC2086
      out=$($bin bench train configs/shakespeare.yaml $sets --set "$key=$value" \
              --steps "$steps" --warmup 1)
      line=$(grep '^train step:' <<<"$out")
      m=$(sed -E 's/^train step: median ([0-9.]+) ms.*/\1/' <<<"$line")
      t=$(sed -E 's/.*\| ([0-9]+) tokens\/s.*/\1/' <<<"$line")
      r=$(grep -oP 'peak RSS \K[0-9.]+' <<<"$out")
      printf '%-22s %s=%-5s run %d: %8.1f ms/step %7d tokens/s peak RSS %7.1f MB\n' \
        "$name" "$key" "$value" "$i" "$m" "$t" "$r"
      ms[$value]+="$m "; tok[$value]+="$t "; rss[$value]+="$r "
    done
  done
  for value in "$off" "$on"; do
    printf '%-22s %s=%-5s median: %8.1f ms/step %7.0f tokens/s peak RSS %7.1f MB\n' "$name" \
      "$key" "$value" "$(tr ' ' '\n' <<<"${ms[$value]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${tok[$value]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${rss[$value]}" | grep . | median)"
  done
  awk -v a="$(tr ' ' '\n' <<<"${ms[$on]}" | grep . | median)" \
      -v b="$(tr ' ' '\n' <<<"${ms[$off]}" | grep . | median)" \
      -v c="$(tr ' ' '\n' <<<"${rss[$on]}" | grep . | median)" \
      -v d="$(tr ' ' '\n' <<<"${rss[$off]}" | grep . | median)" -v n="$name" -v k="$key" \
      'BEGIN {printf "%-22s %s on / off: step time %.2fx, peak RSS %.2fx\n", n, k, a / b, c / d}'
  unset ms tok rss
done

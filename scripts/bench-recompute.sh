#!/usr/bin/env bash
# model.recompute beside keeping every activation, on the same job in the same sitting:
# `bench train` alternating the two REPEATS times per shape; prints each run's median step,
# tokens/s and peak RSS (rank 0, activations included), then the medians and the ratios
# recompute / keep. Shared, noisy machine: read the ratios, and run it twice.
#   scripts/bench-recompute.sh [STEPS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
repeats=${2:-3}
bin=build/ringmaster

# name | overrides (1 rank, the machine's threads)
shapes=(
  "L4 C256 T256 B8|--set model.layers=4 --set model.width=256 --set model.heads=4 --set model.seq_len=256 --set train.micro_batch=8 --set train.global_batch=8"
  "L6 C128 T1024 B4|--set model.layers=6 --set model.width=128 --set model.heads=4 --set model.seq_len=1024 --set train.micro_batch=4 --set train.global_batch=4"
)
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
for spec in "${shapes[@]}"; do
  IFS='|' read -r name sets <<<"$spec"
  declare -A ms=() tok=() rss=()
  for ((i = 1; i <= repeats; i++)); do
    for recompute in false true; do
      # shellcheck disable=SC2086
      out=$($bin bench train configs/shakespeare.yaml $sets --set model.recompute=$recompute \
              --steps "$steps" --warmup 1)
      line=$(grep '^train step:' <<<"$out")
      m=$(sed -E 's/^train step: median ([0-9.]+) ms.*/\1/' <<<"$line")
      t=$(sed -E 's/.*\| ([0-9]+) tokens\/s.*/\1/' <<<"$line")
      r=$(grep -oP 'peak RSS \K[0-9.]+' <<<"$out")
      printf '%-18s recompute=%-5s run %d: %8.1f ms/step %7d tokens/s peak RSS %7.1f MB\n' \
        "$name" "$recompute" "$i" "$m" "$t" "$r"
      ms[$recompute]+="$m "; tok[$recompute]+="$t "; rss[$recompute]+="$r "
    done
  done
  for recompute in false true; do
    printf '%-18s recompute=%-5s median: %8.1f ms/step %7.0f tokens/s peak RSS %7.1f MB\n' "$name" \
      "$recompute" "$(tr ' ' '\n' <<<"${ms[$recompute]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${tok[$recompute]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${rss[$recompute]}" | grep . | median)"
  done
  awk -v a="$(tr ' ' '\n' <<<"${ms[true]}" | grep . | median)" \
      -v b="$(tr ' ' '\n' <<<"${ms[false]}" | grep . | median)" \
      -v c="$(tr ' ' '\n' <<<"${rss[true]}" | grep . | median)" \
      -v d="$(tr ' ' '\n' <<<"${rss[false]}" | grep . | median)" -v n="$name" \
      'BEGIN {printf "%-18s recompute / keep: step time %.2fx, peak RSS %.2fx\n", n, a / b, c / d}'
  unset ms tok rss
done

#!/usr/bin/env bash
# Weak scaling on this machine: each job on 1 rank and on 2 ranks with the same micro-batch per
# rank and one thread per rank, overlap on and off, beside PyTorch DDP (gloo) on the same shapes
# when Debian's python3-torch is installed. Prints the bench lines; efficiency = tokens/s on 2
# ranks / (2 x tokens/s on 1 rank). Machines here are shared and noisy: run it twice.
#   scripts/bench-scaling.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}
bin=build/ringmaster
anchor=scripts/torch_gpt_ddp.py

# name | ringmaster overrides | anchor shape
jobs=(
  "default|--set model.seq_len=128 --set model.layers=4 --set model.heads=4 --set model.width=128 --set train.micro_batch=16|--L 4 --H 4 --C 128 --T 128 --B 16"
  "width768|--set model.seq_len=256 --set model.layers=2 --set model.heads=12 --set model.width=768 --set train.micro_batch=4|--L 2 --H 12 --C 768 --T 256 --B 4"
)
for spec in "${jobs[@]}"; do
  IFS='|' read -r name sets shape <<<"$spec"
  mb=$(sed -E 's/.*train.micro_batch=([0-9]+).*/\1/' <<<"$sets")
  for overlap in true false; do
    for np in 1 2; do
      echo "== $name np=$np overlap=$overlap"
      # shellcheck disable=SC2086
      $bin bench train configs/shakespeare.yaml $sets --set train.global_batch=$((mb * np)) \
        --set parallel.threads_per_rank=1 --set parallel.overlap=$overlap --nproc $np \
        --steps "$steps" | grep -E '^(train step|overlap|memory)'
    done
  done
  if [[ -f $anchor ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    for np in 1 2; do
      echo "== $name PyTorch np=$np (1 thread per process)"
      # shellcheck disable=SC2086
      /usr/bin/python3 $anchor --nproc $np $shape --threads 1 --steps "$steps" | grep -E '^(step|gloo)'
    done
  fi
done

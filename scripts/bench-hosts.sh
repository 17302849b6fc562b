#!/usr/bin/env bash
# Ringmaster across test hosts (tests/cluster/cluster.sh): one rank per host, links shaped with
# netem where the kernel has it, else a token bucket (rate) and tests/cluster/link_delay.c (delay).
# 10 Gbit/s gets no delay: a userspace delay line moving 10 Gbit/s takes ~60% of a core, which on
# this 2-core machine would come out of the training it measures. Prints
#  1. `bench allreduce` on 2 hosts x 2 ranks: the hierarchical path (rails, and host leaders)
#     beside plain MPI_Allreduce on the same buffers, unshaped links;
#  2. weak scaling of one training shape at 2 and 4 hosts, per link rate, with overlap on and
#     off, two bucket sizes, and bf16 gradient reduction at the slowest rate. Efficiency =
#     tokens/s on H hosts / (H x tokens/s of one rank alone); "vs 1 host" divides by H ranks on
#     one host instead, which takes out what this 2-core machine cannot give (H ranks share 2
#     cores) and leaves what the links cost.
# Needs root. Machines here are shared and noisy: run it twice.
#   scripts/bench-hosts.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
bin=$PWD/build/ringmaster
cluster=$PWD/tests/cluster/cluster.sh
export RM_CLUSTER_NAME=rmbench RM_CLUSTER_NET=10.233.20
why=$($cluster check) || { echo "cannot run: $why"; exit 1; }
trap '$cluster down >/dev/null 2>&1 || true' EXIT
state=/run/ringmaster-cluster/$RM_CLUSTER_NAME

echo "### 1. all-reduce, 2 hosts x 2 ranks, unshaped veth links"
$cluster up 2 2 >/dev/null
$cluster on h0 "$bin" bench allreduce --hosts "$state/hostfile" --max-mb 64 --seconds 0.3

echo
echo "### 2. weak scaling, one rank per host"
$cluster up 4 1 >/dev/null
head -2 "$state/hostfile" >"$state/hosts2"
cp "$state/hostfile" "$state/hosts4"
shape=(--set model.seq_len=256 --set model.layers=2 --set model.heads=12 --set model.width=768
       --set parallel.threads_per_rank=1)
mb=4
tok_s() {  # tok_s ARGS...: the bench's tokens/s
  "$@" --steps "$steps" --warmup 1 2>&1 | sed -nE 's/^train step: .* \| ([0-9.]+) tokens\/s.*/\1/p'
}
bench() {  # bench NPROC_OR_HOSTS [SETS...]
  local where=$1
  shift
  if [[ $where == h* ]]; then
    tok_s $cluster on h0 "$bin" bench train configs/shakespeare.yaml "${shape[@]}" \
      --set train.micro_batch=$mb --set train.global_batch=$((mb * ${where#h})) \
      --hosts "$state/hosts${where#h}" "$@"
  else
    tok_s "$bin" bench train configs/shakespeare.yaml "${shape[@]}" --set train.micro_batch=$mb \
      --set train.global_batch=$((mb * where)) --nproc "$where" "$@"
  fi
}
one=$(bench 1)
declare -A local_rate
for n in 2 4; do local_rate[$n]=$(bench $n); done
echo "shape: GPT L2 C768 T256, micro-batch $mb per rank, 1 thread per rank; $steps timed steps"
echo "1 rank alone: $one tokens/s; on one host: 2 ranks ${local_rate[2]}, 4 ranks ${local_rate[4]} tokens/s"
printf '%-12s %-6s %-8s %-8s %-6s %12s %11s %10s\n' link hosts overlap bucket reduce tokens/s efficiency "vs 1 host"
for spec in "10gbit" "1gbit 0.2ms"; do
  read -r link delay <<<"$spec"
  $cluster shape $link $delay
  for hosts in 2 4; do
    configs=("true 25 fp32" "false 25 fp32" "true 4 fp32" "false 4 fp32")
    [[ $link == 1gbit ]] && configs+=("true 25 bf16")
    for c in "${configs[@]}"; do
      read -r overlap bucket reduce <<<"$c"
      rate=$(bench h$hosts --set parallel.overlap=$overlap --set parallel.bucket_mb=$bucket \
        --set parallel.grad_reduce=$reduce)
      eff=$(awk -v r="$rate" -v o="$one" -v h=$hosts 'BEGIN{printf "%.0f%%", 100*r/(h*o)}')
      rel=$(awk -v r="$rate" -v l="${local_rate[$hosts]}" 'BEGIN{printf "%.0f%%", 100*r/l}')
      printf '%-12s %-6s %-8s %-8s %-6s %12s %11s %10s\n' "$link${delay:+/$delay}" $hosts $overlap "${bucket}MB" \
        $reduce "$rate" "$eff" "$rel"
    done
  done
  $cluster unshape
done

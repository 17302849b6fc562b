#!/usr/bin/env bash
# The planner against real runs of the same job here. For each case it prints `ringmaster plan`'s
# step time and per-rank memory for parallel.shard: none (planning/step_plan.h) beside
#  - the step time measured by `bench train` (median of the timed steps), and
#  - the peak RSS of a short `ringmaster run` of the same job that saves a checkpoint and writes
#    its final weights (/usr/bin/time: the largest process of the run, i.e. the largest rank),
# and the ratio planned / measured. The cluster file of each case is this-machine.yaml's numbers
# with the case's shape; the links between test hosts (tests/cluster) are shaped as the file says.
# Cases: 1 rank; 2 ranks on this host; 2 hosts x 1 rank at 10 Gbit/s and at 1 Gbit/s + 0.2 ms;
# 4 hosts x 1 rank at 1 Gbit/s + 0.2 ms, whose 4 ranks share this machine's 2 cores (so its
# cluster file gives each rank half a core's FLOP rate: that is the machine they ran on).
# Needs root for the test hosts. Shared, noisy machine: run it twice.
#   scripts/plan-check.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
bin=$PWD/build/ringmaster
cluster=$PWD/tests/cluster/cluster.sh
export RM_CLUSTER_NAME=rmplan RM_CLUSTER_NET=10.233.21
why=$($cluster check) || { echo "cannot run: $why"; exit 1; }
work=$(mktemp -d)
trap '$cluster down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
state=/run/ringmaster-cluster/$RM_CLUSTER_NAME

# The weak-scaling shape of scripts/bench-hosts.sh: GPT L2 C768 T256, micro-batch 4 per rank.
shape=(--set model.seq_len=256 --set model.layers=2 --set model.heads=12 --set model.width=768
       --set parallel.threads_per_rank=1 --set train.micro_batch=4)

cluster_file() {  # cluster_file NODES PER_NODE TFLOPS INTER_GBS INTER_US
  cat >"$work/cluster.yaml" <<EOF
name: "this machine as $1 x $2"
nodes: $1
devices_per_node: $2
device: {type: cpu, name: "1 core per rank", tflops: $3, mfu: 0.9}
node_memory_gib: 23.5
intra_node: {bandwidth_gbs: 5, latency_us: 5}
inter_node: {bandwidth_gbs: $4, latency_us: $5}
filesystem: {write_gbs: 1}
node_mtbf_hours: 8760
EOF
}

# where: "local N" (N ranks on this host) or "hosts N" (N test hosts, 1 rank each)
launch() {  # launch WHERE CMD ARGS...: runs a ringmaster command there
  local kind=$1 n=$2
  shift 2
  if [[ $kind == local ]]; then
    "$bin" "$@" --nproc "$n"
  else
    head -"$n" "$state/hostfile" >"$work/hosts"
    $cluster on h0 "$bin" "$@" --hosts "$work/hosts"
  fi
}

printf '%-34s %11s %11s %7s %12s %12s %7s\n' case "plan ms" "measured" ratio "plan MiB" "peak MiB" ratio
check() {  # check NAME KIND N TFLOPS INTER_GBS INTER_US
  local name=$1 kind=$2 n=$3 tflops=$4 gbs=$5 us=$6 nodes per_node
  if [[ $kind == local ]]; then nodes=1 per_node=$n; else nodes=$n per_node=1; fi
  cluster_file $nodes $per_node "$tflops" "$gbs" "$us"
  local batch=(--set train.global_batch=$((4 * n)))
  local row plan_ms plan_mib ms mib
  row=$("$bin" plan configs/shakespeare.yaml "${shape[@]}" "${batch[@]}" --cluster "$work/cluster.yaml" |
        grep '^plan-row shard=none recompute=0 ')
  plan_ms=$(sed -E 's/.* step_ms=([0-9.]+).*/\1/' <<<"$row")
  plan_mib=$(sed -E 's/.* rss_mib=([0-9.]+).*/\1/' <<<"$row")
  ms=$(launch $kind $n bench train configs/shakespeare.yaml "${shape[@]}" "${batch[@]}" \
         --steps "$steps" --warmup 1 2>&1 | sed -nE 's/^train step: median ([0-9.]+) ms.*/\1/p')
  rm -rf "$work/run"
  mib=$( { /usr/bin/time -f 'peak-kib %M' \
           bash -c "$(declare -f launch); bin=$bin cluster=$cluster state=$state work=$work \
                    launch $kind $n run configs/shakespeare.yaml ${shape[*]} ${batch[*]} \
                    --set train.steps=3 --set train.eval_every=0 --set checkpoint.every=2 \
                    --set run_dir=$work/run" >/dev/null; } 2>&1 |
         sed -nE 's/^peak-kib ([0-9]+)$/\1/p' | awk '{printf "%.0f", $1 / 1024}')
  printf '%-34s %11.0f %11.0f %6.0f%% %12.0f %12.0f %6.0f%%\n' "$name" "$plan_ms" "$ms" \
    "$(awk -v a="$plan_ms" -v b="$ms" 'BEGIN{print 100*(a/b-1)}')" "$plan_mib" "$mib" \
    "$(awk -v a="$plan_mib" -v b="$mib" 'BEGIN{print 100*(a/b-1)}')"
}

check "1 rank" local 1 0.12 0.125 50
check "2 ranks, one host" local 2 0.12 0.125 50
$cluster up 4 1 >/dev/null
$cluster shape 10gbit
check "2 hosts, 10 Gbit/s" hosts 2 0.12 1.25 50
$cluster shape 1gbit 0.2ms
check "2 hosts, 1 Gbit/s + 0.2 ms" hosts 2 0.12 0.125 250
check "4 hosts, 1 Gbit/s + 0.2 ms (2 cores)" hosts 4 0.06 0.125 250
$cluster unshape

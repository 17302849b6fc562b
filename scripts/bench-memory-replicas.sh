#!/usr/bin/env bash
# What in-memory checkpoint replicas cost across hosts: the width-768 job (GPT L2 H12 C768 T256,
# 4 sequences a rank) on HOSTS test hosts (tests/cluster/cluster.sh: network namespaces on this
# machine) with RANKS ranks each, links shaped to RATE, memory_every 0 and 1 alternated REPEATS
# times: the steady-state cost from the traces of steps 4.. (scripts/trace_steps.py: the interval
# from one step's start to the next, medians), the wall time of `ringmaster run` per step beyond
# the run without, and the bytes each rank sends a step. Needs root (network namespaces).
#   scripts/bench-memory-replicas.sh     HOSTS=2 RANKS=1 RATE=10gbit REPEATS=3 STEPS=12 by default
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
hosts=${HOSTS:-2} ranks=${RANKS:-1} rate=${RATE:-10gbit} repeats=${REPEATS:-3} steps=${STEPS:-12}
bin=${RINGMASTER:-$repo/build/ringmaster}
[[ -x $bin ]] || { echo "bench-memory-replicas: $bin is missing: run 'make build' first" >&2; exit 2; }
export RM_CLUSTER_NAME=rmbench RM_CLUSTER_NET=10.233.21
cluster=$repo/tests/cluster/cluster.sh
"$cluster" check >/dev/null || { echo "bench-memory-replicas: this machine cannot make test hosts" >&2; exit 2; }
out=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
"$cluster" up "$hosts" "$ranks" >/dev/null
"$cluster" shape "$rate" >/dev/null
hostfile=/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
now() { date +%s.%N; }
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
     "width 768, $hosts test hosts x $ranks ranks, links $rate, $steps steps, $repeats runs each, alternated"
for r in $(seq "$repeats"); do
  for every in 0 1; do
    dir=$out/run-$every-$r
    t0=$(now)
    (cd "$out" && "$cluster" on h0 "$bin" run "$repo/configs/shakespeare.yaml" --hosts "$hostfile" \
       --set model.layers=2 --set model.heads=12 --set model.width=768 --set model.seq_len=256 \
       --set train.micro_batch=4 --set train.global_batch=$((4 * hosts * ranks)) \
       --set train.steps="$steps" --set train.eval_every=0 --set checkpoint.every=100 \
       --set parallel.threads_per_rank=1 --set train.log_every=1000 --set run_dir="$dir" \
       --set data.train="$repo/data/tinyshakespeare.txt" \
       --set checkpoint.memory_every=$every --set observability.trace=true \
       --set observability.trace_start=4 --set observability.trace_steps=$((steps - 5))) \
       > "$out/log-$every-$r" 2>&1 ||
      { cat "$out/log-$every-$r"; exit 1; }
    t1=$(now)
    echo "$t0 $t1" | awk -v s="$steps" '{print ($2-$1)*1000/s}' >> "$out/wall-$every"
    python3 -c "import json, sys; print(*(json.loads(l)['step_ms'] for l in open(sys.argv[1])), sep='\n')" \
      "$dir/metrics.jsonl" >> "$out/step-$every"
    python3 scripts/trace_steps.py "$dir" >> "$out/trace-$every"  # steady-state interval, save
  done
done
grep -q "each rank's slice also kept by a rank on the next host" "$out/log-1-1" ||
  { cat "$out/log-1-1"; echo "bench-memory-replicas: replicas were not on" >&2; exit 1; }
w0=$(median < "$out/wall-0"); w1=$(median < "$out/wall-1"); s0=$(median < "$out/step-0")
params=$(grep -o '[0-9.]*M parameters' "$out/log-0-1" | head -1)
i0=$(cut -d' ' -f1 "$out/trace-0" | median); i1=$(cut -d' ' -f1 "$out/trace-1" | median)
save=$(cut -d' ' -f2 "$out/trace-1" | median)
awk -v w0="$w0" -v w1="$w1" -v s0="$s0" -v p="$params" -v n=$((hosts * ranks)) -v i0="$i0" \
    -v i1="$i1" -v save="$save" -v steps="$steps" 'BEGIN {
  printf "each rank saves and sends 1/%d of %s x 12 bytes a step\n", n, p
  printf "memory checkpoint + replica every step, steady state (traced steps 4..): a step every " \
         "%.1f ms without, %.1f ms with: %+.1f ms = %+.1f%%; the save itself %.1f ms (the slowest " \
         "rank, the wait for the last replica included)\n", i0, i1, i1 - i0, 100 * (i1 - i0) / i0,
         save
  printf "whole run, wall time per step: %.1f ms without, %.1f ms with: %+.1f ms over %d steps " \
         "(median step %.1f ms)\n", w0, w1, w1 - w0, steps, s0 }'

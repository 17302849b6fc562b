#!/usr/bin/env bash
# What checkpoint.memory_every costs and what it saves, at width 768 (GPT L2 H12 C768 T256,
# 4 sequences a rank), 2 ranks x 1 thread on this host:
#  1. overhead: the same training run with memory_every 0 and 1, alternated REPEATS times: the
#     steady-state cost from the traces of steps 4.. (scripts/trace_steps.py: the interval from
#     one step's start to the next, and the save itself, medians), and the wall time of
#     `ringmaster run` per step beyond the run without, which adds a short run's fixed costs
#     (making and first touching the segments, removing them);
#  2. recovery: rank 1 SIGKILLed at the start of step KILL_AT (disk checkpoints every 100 steps:
#     none by then), `run` restarting it: from the kill (the last metrics line before it) to the
#     next step completed, and the steps recomputed (memory: 1; disk: all of them).
#   scripts/bench-memory-checkpoint.sh     REPEATS=3 STEPS=12 KILL_AT=8 by default; RINGMASTER=BIN
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-3}
steps=${STEPS:-12}
kill_at=${KILL_AT:-8}
bin=${RINGMASTER:-$PWD/build/ringmaster}  # RINGMASTER=another build: its figures, same script
[[ -x $bin ]] || { echo "bench-memory-checkpoint: $bin is missing: run 'make build' first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(--set model.layers=2 --set model.heads=12 --set model.width=768 --set model.seq_len=256
       --set train.micro_batch=4 --set train.global_batch=8 --set train.steps="$steps"
       --set train.eval_every=0 --set checkpoint.every=100 --set parallel.threads_per_rank=1
       --set train.log_every=1000
       --set observability.trace=true --set observability.trace_start=4
       --set observability.trace_steps=$((steps > 8 ? steps - 5 : 3)))
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
now() { date +%s.%N; }

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
     "width 768, 2 ranks x 1 thread, $steps steps, $repeats runs each, alternated"
for r in $(seq "$repeats"); do
  for every in 0 1; do
    dir=$out/run-$every-$r
    t0=$(now)
    "$bin" run configs/shakespeare.yaml --nproc 2 "${shape[@]}" --set run_dir="$dir" \
      --set checkpoint.memory_every=$every > "$out/log-$every-$r" 2>&1
    t1=$(now)
    echo "$t0 $t1" | awk -v s="$steps" '{print ($2-$1)*1000/s}' >> "$out/wall-$every"
    python3 -c "import json, sys; print(*(json.loads(l)['step_ms'] for l in open(sys.argv[1])), sep='\n')" \
      "$dir/metrics.jsonl" >> "$out/step-$every"
    python3 scripts/trace_steps.py "$dir" >> "$out/trace-$every"  # steady-state interval, save
  done
done
w0=$(median < "$out/wall-0"); w1=$(median < "$out/wall-1"); s0=$(median < "$out/step-0")
i0=$(cut -d' ' -f1 "$out/trace-0" | median); i1=$(cut -d' ' -f1 "$out/trace-1" | median)
save=$(cut -d' ' -f2 "$out/trace-1" | median)
params=$(grep -o '[0-9.]*M parameters' "$out/log-0-1" | head -1)
awk -v w0="$w0" -v w1="$w1" -v s0="$s0" -v p="$params" -v save="$save" -v n="$steps" \
    -v i0="$i0" -v i1="$i1" 'BEGIN {
  printf "state (shard none: parameters + 2 moments, fp32): %s x 12 bytes, each rank saving half\n", p
  printf "memory checkpoint every step, steady state (traced steps 4..): a step every %.1f ms " \
         "without, %.1f ms with: %+.1f ms = %+.1f%%; the save itself %.1f ms (the slowest rank) " \
         "= %.1f%% of the median step (%.1f ms)\n", i0, i1, i1 - i0, 100 * (i1 - i0) / i0, save,
         100 * save / s0, s0
  printf "whole run, wall time per step: %.1f ms without, %.1f ms with: %+.1f ms over %d steps, " \
         "of which about %.0f ms once (segments made and first touched, removed at the end)\n",
         w0, w1, w1 - w0, n, (w1 - w0 - (i1 - i0)) * n }'

echo "# recovery: rank 1 killed at the start of step $kill_at, restarted by run"
for every in 1 0; do
  dir=$out/kill-$every
  "$bin" run configs/shakespeare.yaml --nproc 2 "${shape[@]}" --set run_dir="$dir" \
    --set checkpoint.memory_every=$every --set resilience.max_restarts=1 \
    --set cluster.env.RM_TEST_FAULT=kill:1:$kill_at > "$out/klog-$every" 2>&1 || true
  python3 - "$dir/events.jsonl" "$every" "$kill_at" <<'EOF'
import json, sys
from datetime import datetime
events = [json.loads(l) for l in open(sys.argv[1])]
t = lambda e: datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
restart = next(e for e in events if e["event"] == "restart")
started = [e for e in events if e["event"] == "started"][-1]
resumed = next((e for e in events if e["event"] == "resumed"), None)
from_step = resumed["step"] if resumed else 0
kill_at = int(sys.argv[3])
where = resumed.get("from", "disk") if resumed else "the beginning"
print(f"memory_every {sys.argv[2]}: restarted from {where} at step {from_step}: "
      f"{kill_at - 1 - from_step} step(s) recomputed; failure seen by run -> ranks started "
      f"again {t(started) - t(restart):.1f} s")
EOF
done

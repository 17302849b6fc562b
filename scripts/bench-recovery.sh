#!/usr/bin/env bash
# How long a failure costs, from the kill to the next step completed, and where the time goes:
# the width-768 job (GPT L2 H12 C768 T256, 4 sequences a rank), `ringmaster run` with
# resilience.max_restarts 1, killed once it has logged KILL_AT steps, REPEATS times each case:
#   rank, memory     this host, 2 ranks, checkpoint.memory_every 1: one rank SIGKILLed
#   rank, no memory  the same with memory_every 0 (no disk checkpoint yet: from the beginning)
#   host, memory     2 test hosts x 1 rank (tests/cluster/cluster.sh, network namespaces; needs
#                    root), memory_every 1, parallel.timeout_s TIMEOUT: every process of h1
#                    killed and its /dev/shm wiped (the host and its memory lost)
# Columns (medians, seconds), from the kill's time, the supervisor's `restart` event and the
# restart's `started` event (its startup_s and restore_s):
#   detect      kill -> `run` decides to restart (mpirun noticing, or the survivors' timeout)
#   launch      -> rank 0's process exists (mpirun starting the ranks)
#   start-up    -> MPI up, model, data and devices ready (startup_s - restore_s)
#   restore     the agreement on a step and the restore itself (restore_s)
#   first step  the first step after the restart (its step_ms)
#   total       kill -> that step completed
#   redone      steps logged before the kill that were trained again
#   scripts/bench-recovery.sh      KILL_AT=6 STEPS=10 REPEATS=3 TIMEOUT=5 by default
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
kill_at=${KILL_AT:-6} steps=${STEPS:-10} repeats=${REPEATS:-3} timeout=${TIMEOUT:-5}
bin=${RINGMASTER:-$repo/build/ringmaster}
[[ -x $bin ]] || { echo "bench-recovery: $bin is missing: run 'make build' first" >&2; exit 2; }
out=$(mktemp -d)
export RM_CLUSTER_NAME=rmrecov RM_CLUSTER_NET=10.233.23
cluster=$repo/tests/cluster/cluster.sh
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
now() { date +%s.%N; }
logged() { [[ -f $1/metrics.jsonl ]] && wc -l <"$1/metrics.jsonl" || echo 0; }
# job_args RUN_DIR MEMORY_EVERY RANKS_IN_ALL
job_args() {
  echo "$repo/configs/shakespeare.yaml --set model.layers=2 --set model.heads=12" \
    "--set model.width=768 --set model.seq_len=256 --set train.micro_batch=4" \
    "--set train.global_batch=$((4 * $3)) --set train.steps=$steps --set train.eval_every=0" \
    "--set train.log_every=1000 --set checkpoint.every=100 --set checkpoint.memory_every=$2" \
    "--set resilience.max_restarts=1 --set parallel.timeout_s=$timeout" \
    "--set parallel.threads_per_rank=1 --set data.train=$repo/data/tinyshakespeare.txt" \
    "--set run_dir=$1"
}
# wait_logged RUN_DIR: until the run has logged KILL_AT steps (at most 10 minutes).
wait_logged() {
  for _ in $(seq 6000); do
    [[ $(logged "$1") -ge $kill_at ]] && return 0
    sleep 0.1
  done
  echo "bench-recovery: $1 never logged $kill_at steps" >&2
  return 1
}
# figures RUN_DIR KILL_TIME LOGGED_AT_KILL: one row of the columns above.
figures() {
  python3 - "$@" <<'PY'
import datetime, json, sys
run, t_kill, at_kill = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
def t(e):
    return datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
events = [json.loads(l) for l in open(run + "/events.jsonl")]
restart = next(e for e in events if e["event"] == "restart")
started = [e for e in events if e["event"] == "started"][-1]
steps = {m["step"]: m for m in map(json.loads, open(run + "/metrics.jsonl"))}
first = steps[started["from_step"] + 1]["step_ms"] / 1000
process = t(started) - started["startup_s"]
row = [t(restart) - t_kill, process - t(restart), started["startup_s"] - started["restore_s"],
       started["restore_s"], first, t(started) + first - t_kill]
print(*("%.2f" % x for x in row), at_kill - started["from_step"])
PY
}
median_row() {  # median of each column of the rows on stdin
  python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
print(*(("%.2f" % statistics.median(float(r[i]) for r in rows)) if i < 6 else
        str(int(statistics.median(int(r[i]) for r in rows))) for i in range(7)), sep=" | ")'
}
# kill_a_rank RUN_DIR SUPERVISOR_PID: SIGKILLs the newest rank process under mpirun.
kill_a_rank() {
  local mpirun rank
  mpirun=$(pgrep -P "$2" -x mpirun) || { echo "bench-recovery: no mpirun under $2" >&2; return 1; }
  rank=$(pgrep -n -P "$mpirun") || { echo "bench-recovery: no rank under mpirun" >&2; return 1; }
  kill -KILL "$rank"
}

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
     "width 768, $steps steps, killed after $kill_at logged, $repeats runs a case; medians"
echo "| case | detect | launch | start-up | restore | first step | kill -> step done | steps redone |"
echo "|---|---|---|---|---|---|---|---|"
for every in 1 0; do
  : >"$out/rows"
  for r in $(seq "$repeats"); do
    dir=$out/rank-$every-$r
    # shellcheck disable=SC2046
    "$bin" run $(job_args "$dir" "$every" 2) --nproc 2 >"$dir.log" 2>&1 &
    sup=$!
    wait_logged "$dir"
    at=$(logged "$dir"); t_kill=$(now)
    kill_a_rank "$dir" "$sup"
    wait "$sup" || { cat "$dir.log"; echo "bench-recovery: the run did not recover" >&2; exit 1; }
    figures "$dir" "$t_kill" "$at" >>"$out/rows"
  done
  name="rank, memory"; [[ $every == 0 ]] && name="rank, no memory"
  echo "| $name | $(median_row <"$out/rows") |"
done
if ! why=$("$cluster" check 2>&1); then
  echo "(host case skipped: $why)"
  exit 0
fi
"$cluster" up 2 1 >/dev/null
hostfile=/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile
: >"$out/rows"
for r in $(seq "$repeats"); do
  dir=$out/host-$r
  # shellcheck disable=SC2046
  (cd "$out" && "$cluster" on h0 "$bin" run $(job_args "$dir" 1 2) --hosts "$hostfile") \
    >"$dir.log" 2>&1 &
  sup=$!
  wait_logged "$dir"
  at=$(logged "$dir"); t_kill=$(now)
  "$cluster" kill h1
  "$cluster" on h1 sh -c 'rm -f /dev/shm/ringmaster-*'
  wait "$sup" || { cat "$dir.log"; echo "bench-recovery: the run did not recover" >&2; exit 1; }
  grep -q "from its replica" "$dir.log" ||
    { cat "$dir.log"; echo "bench-recovery: h1's rank was not restored from its replica" >&2; exit 1; }
  figures "$dir" "$t_kill" "$at" >>"$out/rows"
done
echo "| host, memory | $(median_row <"$out/rows") |"

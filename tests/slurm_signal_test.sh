#!/usr/bin/env bash
# Preemption notice under real Slurm: `scancel --signal=USR1` (what `sbatch --signal=USR1@120`
# delivers before a time limit) to a 2-node `srun --mpi=pmix ringmaster worker JOB` step makes
# both ranks checkpoint the step they are in and exit 75; running the same step again resumes
# from that checkpoint and finishes, with each step in metrics.jsonl once, on the weights and
# losses of the same job run straight through in a step of its own. Skips (exit 77) when
# no Slurm cluster answers (CI starts one with ../shared/slurm/start-local-slurm).
#   slurm_signal_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
source "$(dirname "$0")/slurm_lib.sh"
require_slurm
dir=$(mktemp -d)
name="rm-signal-$$"
trap 'scancel -n "$name" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
cat >"$dir/job.yaml" <<EOT
name: slurm-signal
run_dir: $dir/run
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 3000, global_batch: 8, micro_batch: 4, eval_every: 0, log_every: 500}
checkpoint: {every: 1000, keep: 2}
parallel: {timeout_s: 30, threads_per_rank: 1}
EOT
sed "s|run_dir: $dir/run|run_dir: $dir/straight|" "$dir/job.yaml" >"$dir/straight.yaml"
step() { timeout 300 srun --mpi=pmix -N 2 -n 2 -t 5 -J "$name" "$bin" worker "${1:-$dir/job.yaml}"; }

# Any command that fails unexpectedly names its line and shows the first step's output, so a
# failure in CI (where only this test's output survives) says which check it was.
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"; cat "$dir/first.out" 2>/dev/null' ERR
logged() { [[ -f $dir/run/metrics.jsonl ]] && wc -l <"$dir/run/metrics.jsonl" || echo 0; }

# The first step is slowed (20 ms a step on rank 0: 3000 steps take a minute at least), so that
# it cannot finish before the signal however fast the machine is; the resumed one is not (the
# fault strikes the attempt it names, and both steps are attempt 0: only the first gets it).
RM_TEST_FAULT=slowstep:0:20 step >"$dir/first.out" 2>&1 &
srun_pid=$!
# Until the step is RUNNING and has logged 30 steps. The step may queue first (an earlier test's
# job still completing on a loaded machine), so allow 240 s by the clock (squeue itself may be
# slow under load), and stop waiting if srun ends. The ctest timeout (900 s) is above the sum of
# this script's own limits, so that a failure always prints what it saw.
jobid="" state=""
deadline=$((SECONDS + 240))
while ((SECONDS < deadline)); do
  kill -0 "$srun_pid" 2>/dev/null || break
  read -r jobid state < <(squeue -h -n "$name" -o "%i %T" | head -1) || true
  [[ $state == RUNNING && $(logged) -ge 30 ]] && break
  sleep 0.1
done
if [[ $state != RUNNING || $(logged) -lt 30 ]]; then
  cat "$dir/first.out"
  echo "FAIL: the step did not reach 30 logged steps while running (job '$jobid', state '$state', $(logged) steps)"
  exit 1
fi
scancel --signal=USR1 "$jobid" || { echo "FAIL: scancel --signal=USR1 $jobid failed"; exit 1; }
code=0
wait "$srun_pid" || code=$?
cat "$dir/first.out"
[[ $code == 75 ]] || { echo "FAIL: srun exited $code, not 75"; exit 1; }
grep -q "stopped by .* checkpoint saved" "$dir/first.out" || { echo "FAIL: no stop message"; exit 1; }
stopped=$(wc -l <"$dir/run/metrics.jsonl")
(( stopped < 3000 )) || { echo "FAIL: the run finished before the signal"; exit 1; }
ckpt=$(printf "%s/run/checkpoints/step_%08d" "$dir" "$stopped")
"$bin" ckpt verify "$ckpt" || { echo "FAIL: no verified checkpoint of step $stopped"; exit 1; }

out=$(step 2>&1) || { echo "$out"; echo "FAIL: the resumed step failed"; exit 1; }
echo "$out" | grep -v "^step"
grep -q "resuming from $ckpt" <<<"$out" || { echo "FAIL: did not resume from $ckpt"; exit 1; }
[[ -s $dir/run/weights.bin ]] || { echo "FAIL: no weights after the resumed run"; exit 1; }
steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$dir/run/metrics.jsonl")
[[ $steps == "$(seq -s ' ' 1 3000)" ]] || { echo "FAIL: metrics.jsonl does not hold steps 1..3000 once each"; exit 1; }

# Bit for bit: the same job on the same 2 nodes, never stopped.
out=$(step "$dir/straight.yaml" 2>&1) || { echo "$out"; echo "FAIL: the straight step failed"; exit 1; }
cmp "$dir/run/weights.bin" "$dir/straight/weights.bin" ||
  { echo "FAIL: the stopped and resumed run's weights differ from the straight run's"; exit 1; }
losses() { python3 -c "import json,sys; print(' '.join(repr(json.loads(l)['loss']) for l in open(sys.argv[1])))" "$1"; }
[[ $(losses "$dir/run/metrics.jsonl") == "$(losses "$dir/straight/metrics.jsonl")" ]] ||
  { echo "FAIL: the resumed run's losses differ from the straight run's"; exit 1; }
echo "PASS: stopped after step $stopped with 75, resumed, finished on the straight run's weights and losses"

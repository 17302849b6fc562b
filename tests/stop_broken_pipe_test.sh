#!/usr/bin/env bash
# A stop of `ringmaster run` whose output goes to a pipe nobody reads any more -- `run ... | tee
# log` and a Ctrl-C, which kills tee too -- still saves and exits 75, on 1 and 2 ranks; the
# same command then resumes and ends with each step logged once. Before: `run` died of SIGPIPE
# at its next line (exit 141), and the ranks with or without their stop checkpoint.
#   stop_broken_pipe_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
dir=$(mktemp -d)
trap 'pkill -KILL -f "run_dir=$dir/" 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$dir"
cat >job.yaml <<EOT
name: broken-pipe
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 40, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 0}
parallel: {threads_per_rank: 1}
EOT
for nproc in 1 2; do
  run="$dir/run$nproc"
  # head reads one byte and exits, tee with it at its next line: from then on every write of
  # `run` (and of mpirun) meets a broken pipe. tee's copy is for a failure's message.
  ( set +e +o pipefail
    RM_TEST_FAULT=slowstep:0:100 timeout -k 5 120 "$bin" run job.yaml --set run_dir="$run" \
      --nproc $nproc 2>&1 | tee "$run.out" | head -c 1 >/dev/null
    echo "${PIPESTATUS[0]}" >"$run.rc" ) &
  for _ in $(seq 600); do
    [[ -f $run/metrics.jsonl && $(wc -l <"$run/metrics.jsonl") -ge 3 ]] && break
    sleep 0.1
  done
  pid=$(pgrep -f "^$bin run job.yaml --set run_dir=$run " | head -n 1) || fail "no run process"
  kill -TERM "$pid"
  wait
  [[ $(cat "$run.rc") == 75 ]] ||
    { cat "$run.out"; fail "$nproc rank(s): run exited $(cat "$run.rc"), not 75"; }
  # The stop checkpoint, committed (not a step_N.tmp a save left) and whole, at the last step
  # logged; and the rerun resumes from it (a rerun from step 0 would also log each step once).
  stopped_at=$(wc -l <"$run/metrics.jsonl")
  ckpt=$run/checkpoints/step_$(printf %08d "$stopped_at")
  ls "$run/checkpoints" | grep -qx 'step_[0-9]*' || fail "$nproc rank(s): no stop checkpoint"
  "$bin" ckpt verify "$ckpt" >/dev/null ||
    fail "$nproc rank(s): the stop checkpoint $ckpt does not verify"
  "$bin" run job.yaml --set run_dir="$run" --nproc $nproc >"$run.again" 2>&1 ||
    { cat "$run.again"; fail "$nproc rank(s): the resume failed"; }
  grep -q "resuming from $ckpt" "$run.again" ||
    { cat "$run.again"; fail "$nproc rank(s): the rerun did not resume from $ckpt"; }
  steps=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$run/metrics.jsonl" | sort -n | uniq | wc -l)
  lines=$(wc -l <"$run/metrics.jsonl")
  [[ $steps == 40 && $lines == 40 ]] || fail "$nproc rank(s): $lines lines for $steps steps"
done
echo "ok: stopped through a broken pipe, saved, exited 75 and resumed on 1 and 2 ranks"

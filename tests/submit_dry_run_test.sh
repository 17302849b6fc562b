#!/usr/bin/env bash
# `ringmaster submit --dry-run` on hostile job values. Each value is either refused at validation
# (exit 2, nothing written) or rendered so that running the printed script -- with stub srun,
# scontrol and sbatch first in PATH -- executes nothing injected and hands the ranks the values
# exactly as written. Checked by running the script, not by reading it. No Slurm needed.
#   submit_dry_run_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mark="$dir/pwned"
cd "$dir"
cat >job.yaml <<EOT
name: hostile
run_dir: $dir/run
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 10, global_batch: 8, micro_batch: 4}
cluster: {nodes: 2, tasks_per_node: 1}
EOT

# 1. Values that cannot be valid Slurm values are refused: exit 2, one message naming the key.
refused=(
  "name=x; touch $mark"
  "cluster.partition=debug; touch $mark"
  "cluster.account=\$(touch $mark)"
  "cluster.qos=\`touch $mark\`"
  "cluster.partition=a'b"
  "cluster.partition=a\"b"
  "cluster.partition=$(printf 'debug\ntouch %s' "$mark")"
  "cluster.env.A=$(printf 'x\ntouch %s' "$mark")"
  "cluster.sbatch_extra=[\"--comment=x\\ntouch $mark\"]"
  "cluster.sbatch_extra=[\"touch $mark\"]"
  "cluster.time=1; touch $mark"
)
for kv in "${refused[@]}"; do
  code=0
  out=$("$bin" submit job.yaml --dry-run --set "$kv" 2>&1) || code=$?
  [[ $code == 2 ]] || fail "exit $code, not 2, for --set $kv: $out"
  key=${kv%%=*}
  grep -q -- "--set ${key%%.A}" <<<"$out" || fail "the message does not name $key: $out"
  [[ ! -e $dir/run && ! -e $mark ]] || fail "something was written for --set $kv"
done

# --nproc, which submit used to ignore silently (the ranks are cluster.nodes x tasks_per_node).
code=0
out=$("$bin" submit job.yaml --dry-run --nproc 3 2>&1) || code=$?
[[ $code == 2 && $out == *"--nproc: a submitted job runs cluster.nodes x cluster.tasks_per_node"* ]] ||
  fail "submit --nproc 3: exit $code: $out"
# ...and it is not offered in submit's help (run's has it).
! "$bin" submit --help | grep -q -- --nproc || fail "submit --help lists --nproc"
"$bin" run --help | grep -q -- --nproc || fail "run --help does not list --nproc"

# 2. Values the job may hold, rendered and run.
hostile=(
  "\$(touch $mark)"
  "\`touch $mark\`"
  "'; touch $mark; '"
  "\"; touch $mark; \""
  "a\\b \$HOME \${X:-y} * ? [a] ~ #"
)
sets=()
for i in "${!hostile[@]}"; do sets+=(--set "cluster.env.H$i=${hostile[$i]}"); done
# cluster.env names of the script's own variables, and PATH: for the ranks only. Before, the
# script exported them: rm_max_restarts ran its \$(...) where the script compares it, and PATH
# lost it wc and scontrol.
sets+=(--set "cluster.env.rm_max_restarts=rm_code[\$(touch $mark)]" --set "cluster.env.PATH=/none")
weird_run="$dir/run \$(touch $mark) ';x @ENV@"
sets+=(--set "run_dir=$weird_run" --set "cluster.sbatch_extra=[--comment=\$(touch\$IFS$mark)]")
# Since Slurm 22.05 srun takes --cpus-per-task only from SRUN_CPUS_PER_TASK: the ranks' step gets it.
sets+=(--set cluster.cpus_per_task=2)
"$bin" submit job.yaml --dry-run "${sets[@]}" >job.sbatch || fail "the dry run failed"
[[ ! -e "$weird_run" ]] || fail "--dry-run wrote the run directory"

# The script's clock, with bash 5's EPOCHREALTIME and without it (bash 4.4, RHEL 8): an ISO UTC
# time with milliseconds either way (before: 1970-01-01T00:00:00.Z without it).
now_def=$(sed -n '/^rm_now() {$/,/^}$/p' job.sbatch)
[[ -n $now_def ]] || fail "no rm_now in the script"
iso='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'
for unset_it in "" "unset EPOCHREALTIME;"; do
  t=$(bash -c "$unset_it $now_def; rm_now")
  [[ $t =~ $iso && $t != 1970* ]] || fail "rm_now ($unset_it) gave '$t'"
done

mkdir -p stubs "$weird_run/slurm"
cat >stubs/srun <<'STUB'
#!/bin/bash
# Records its arguments and the hostile variables, NUL-separated, and succeeds.
printf '%s\0' "$@" >"$STUB_OUT/srun.args"
for i in 0 1 2 3 4; do v="H$i"; printf '%s\0' "${!v}"; done >"$STUB_OUT/srun.env"
printf '%s\0' "$PATH" "$rm_max_restarts" "${SRUN_CPUS_PER_TASK:-unset}" >"$STUB_OUT/srun.scoped"
echo "${RM_START_RETRY:-unset}" >>"$STUB_OUT/srun.attempts"
# A step that succeeds ends with rank 0's "finished" event (builtins only: PATH is /none here).
config=${*: -1}
[[ ( ${STUB_SRUN_EXIT:-0} == 0 || -n ${STUB_FINISH_ANYWAY:-} ) && -z ${STUB_NO_FINISH:-} ]] &&
  echo '{"event":"finished"}' >>"${config%/*}/events.jsonl"
# STUB_WAIT_STOP: ranks that are up ("started") and wait for the stop, then exit 1 without rank
# 0's "stopped" event -- a stop whose checkpoint could not be saved.
if [[ -n ${STUB_WAIT_STOP:-} ]]; then
  trap 'exit 1' USR1
  echo '{"event":"started"}' >>"${config%/*}/events.jsonl"
  : >"$STUB_OUT/srun.up"
  for (( i = 0; i < 600; i++ )); do read -r -t 0.1 <> <(:) || true; done
  exit 3
fi
exit "${STUB_SRUN_EXIT:-0}"
STUB
cat >stubs/scontrol <<'STUB'
#!/bin/bash
# Records its arguments and fails; `show job` answers with STUB_RESTARTS when that is set.
echo "$@" >>"$STUB_OUT/scontrol.calls"
[[ $1 == show && -n ${STUB_RESTARTS:-} ]] && { echo "JobId=42 JobState=REQUEUED Restarts=$STUB_RESTARTS"; exit 0; }
exit 1
STUB
printf '#!/bin/bash\nexit 1\n' >stubs/sbatch
chmod +x stubs/*
run_script() {  # SRUN_EXIT
  STUB_OUT=$dir STUB_SRUN_EXIT=$1 PATH="$dir/stubs:$PATH" SLURM_JOB_ID=42 SLURM_NTASKS=2 \
    SLURM_JOB_NODELIST=node1 bash job.sbatch >script.out 2>&1
}
code=0
run_script 0 || code=$?
cat script.out
[[ $code == 0 ]] || fail "the script exited $code with a successful step"
[[ ! -e $mark ]] || fail "running the script executed an injected command"
mapfile -d '' env_seen <srun.env
for i in "${!hostile[@]}"; do
  [[ ${env_seen[$i]} == "${hostile[$i]}" ]] || fail "H$i reached srun as '${env_seen[$i]}'"
done
mapfile -d '' scoped <srun.scoped
[[ ${scoped[0]} == /none && ${scoped[1]} == "rm_code[\$(touch $mark)]" ]] ||
  fail "cluster.env did not reach srun as given: ${scoped[*]}"
[[ ${scoped[2]} == 2 ]] || fail "srun got SRUN_CPUS_PER_TASK=${scoped[2]}, not cluster.cpus_per_task 2"
mapfile -d '' args <srun.args
expected=(--mpi=pmix --kill-on-bad-exit=1 "$bin" worker "$weird_run/config.yaml")
[[ "${args[*]}" == "${expected[*]}" ]] || fail "srun got: ${args[*]}"
grep -q '"event": "finished"' "$weird_run/events.jsonl" || fail "no finished event"

# A step that stopped after saving (75) is requeued with this job's id; when scontrol fails the
# script says so and exits with the step's code.
code=0
run_script 75 || code=$?
[[ $code == 75 ]] || fail "the script exited $code after a failed requeue"
[[ $(head -n 1 scontrol.calls) == "requeue 42" ]] || fail "scontrol got: $(cat scontrol.calls)"
grep -q "could not requeue" script.out || fail "no message about the failed requeue"
# scontrol failed (killed as the requeue it asked for ended this run), but the job's Restarts grew:
# the requeue went through (before: "could not requeue" and a requeue_failed event).
code=0
STUB_RESTARTS=1 run_script 75 || code=$?
[[ $code == 0 ]] || { cat script.out; fail "the script exited $code after a requeue that went through"; }
! grep -q "could not requeue" script.out || fail "a requeue that went through was said to fail"
[[ ! -e $mark ]] || fail "running the script executed an injected command"
# srun returned 0 for a node that failed under running ranks: without rank 0's "finished" event
# it is a failure (before: "training finished", a finished event, exit 0).
code=0
STUB_NO_FINISH=1 run_script 0 || code=$?
[[ $code == 1 ]] || { cat script.out; fail "the script exited $code for a step that did not finish"; }
grep -q "recorded no end of training" script.out || fail "no word of the unfinished step"
[[ ! -e $mark ]] || fail "running the script executed an injected command"
# Ranks that die before any "started" event (here: always) are started again twice at once,
# RM_START_RETRY 1 and 2, not counted as restarts; then the failure counts (max_restarts 0).
rm -f srun.attempts
code=0
run_script 137 || code=$?
[[ $code == 137 ]] || fail "the script exited $code after ranks that never started"
[[ $(tr '\n' ' ' <srun.attempts) == "0 1 2 " ]] || fail "srun attempts: $(tr '\n' ' ' <srun.attempts)"
[[ $(grep -c '"event": "start_retry"' "$weird_run/events.jsonl") == 2 ]] || fail "not 2 start_retry events"
grep -q "giving up after 0 restart(s)" script.out || { cat script.out; fail "the failure was not counted"; }
[[ ! -e $mark ]] || fail "counting the failure executed an injected command (cluster.env.rm_max_restarts)"
# A failure count that cannot be written (here a directory where the file goes; in life a full
# disk, a removed slurm/ folder) ends the job unrequeued: an empty count compared as 0, and the
# script requeued for ever past resilience.max_restarts.
rm -f "$weird_run"/slurm/failures-42 scontrol.calls
mkdir "$weird_run"/slurm/failures-42
code=0
run_script 137 || code=$?
[[ $code == 137 ]] || { cat script.out; fail "the script exited $code with an unwritable failure count"; }
grep -q "cannot be written or read; not requeued" script.out || { cat script.out; fail "no word of the failure count"; }
! grep -q "^requeue" scontrol.calls 2>/dev/null || fail "requeued although the failures cannot be counted"
rmdir "$weird_run"/slurm/failures-42
# Ranks that refuse the job (exit 2: bad input, or a CPU the build cannot run on) end it FAILED at
# once: not started again as a start-up death, not requeued, not counted as a failure.
rm -f srun.attempts scontrol.calls "$weird_run"/slurm/failures-42
code=0
run_script 2 || code=$?
[[ $code == 2 ]] || { cat script.out; fail "the script exited $code after ranks that refused the job"; }
[[ $(tr '\n' ' ' <srun.attempts) == "0 " ]] || fail "srun attempts after a refusal: $(tr '\n' ' ' <srun.attempts)"
grep -q "the ranks refused the job (exit code 2" script.out || { cat script.out; fail "no word of the refusal"; }
[[ $(tail -n 1 "$weird_run/events.jsonl") == *'"event": "failed", "reason": "bad_input"'* ]] ||
  fail "no bad_input event last: $(tail -n 1 "$weird_run/events.jsonl")"
! grep -q "^requeue" scontrol.calls 2>/dev/null || fail "a refused job was requeued"
[[ ! -e "$weird_run"/slurm/failures-42 ]] || fail "a refusal was counted as a failure"
# Training finished (rank 0's "finished"), then a rank died in MPI's teardown (exit 1): the job is
# done, exit 0 and an exit_after_finish event (before: counted as a failure, FAILED with
# max_restarts 0).
rm -f scontrol.calls "$weird_run"/slurm/failures-42
code=0
STUB_FINISH_ANYWAY=1 run_script 1 || code=$?
[[ $code == 0 ]] || { cat script.out; fail "the script exited $code after a finish and a teardown death"; }
grep -q "training finished (weights.bin written), then the ranks exited with code 1" script.out ||
  { cat script.out; fail "no word of the finish"; }
[[ $(tail -n 1 "$weird_run/events.jsonl") == *'"event": "exit_after_finish"'* ]] ||
  fail "no exit_after_finish event last: $(tail -n 1 "$weird_run/events.jsonl")"
! grep -q "^requeue" scontrol.calls 2>/dev/null || fail "a finished job was requeued"
# Ranks that cannot start (132: not executable, or SIGILL from a build for another CPU) are not
# started again nor requeued (before: started three times, then counted and requeued).
rm -f srun.attempts scontrol.calls "$weird_run"/slurm/failures-42
code=0
run_script 132 || code=$?
[[ $code == 132 ]] || { cat script.out; fail "the script exited $code after ranks that could not start"; }
[[ $(tr '\n' ' ' <srun.attempts) == "0 " ]] || fail "srun attempts after 132: $(tr '\n' ' ' <srun.attempts)"
grep -q "the ranks did not start (exit code 132" script.out || { cat script.out; fail "no word of the start"; }
! grep -q "^requeue" scontrol.calls 2>/dev/null || fail "ranks that could not start were requeued"
# A USR1 notice whose stop did not save (no "stopped" event from rank 0, exit 1): a failure,
# counted -- here the end, max_restarts 0 -- not a stop requeued uncounted (before: requeued for
# ever while the disk stayed full, each run losing what it trained).
rm -f scontrol.calls srun.up "$weird_run"/slurm/failures-42
STUB_OUT=$dir STUB_WAIT_STOP=1 STUB_NO_FINISH=1 PATH="$dir/stubs:$PATH" SLURM_JOB_ID=42 SLURM_NTASKS=2 \
  SLURM_JOB_NODELIST=node1 bash job.sbatch >script.out 2>&1 &
script_pid=$!
for _ in $(seq 300); do [[ -e srun.up ]] && break; sleep 0.1; done
[[ -e srun.up ]] || { kill "$script_pid"; cat script.out; fail "the stub step never came up"; }
kill -USR1 "$script_pid"
code=0
wait "$script_pid" || code=$?
[[ $code == 1 ]] || { cat script.out; fail "the script exited $code after a stop that did not save"; }
grep -q "giving up after 0 restart(s)" script.out || { cat script.out; fail "the unsaved stop was not counted"; }
! grep -q "^requeue" scontrol.calls 2>/dev/null || { cat script.out; fail "an unsaved stop was requeued"; }
# Submitted through a link (an install that moves a link to each new version): the script runs
# the link, so a requeue after an upgrade that removed the old version finds the new one (before:
# the link's target then, gone by the requeue).
mkdir -p linked
ln -s "$bin" linked/ringmaster
"$dir/linked/ringmaster" submit job.yaml --dry-run >linked.sbatch || fail "the dry run through a link failed"
grep -q "^rm_bin='$dir/linked/ringmaster'\$" linked.sbatch ||
  fail "the script does not run the link: $(grep '^rm_bin=' linked.sbatch)"
echo "PASS: ${#refused[@]} hostile values refused, ${#hostile[@]} rendered inert, start-up deaths retried twice"

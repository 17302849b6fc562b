#!/usr/bin/env bash
# A host lost for good, and the job going on without it (resilience.shrink, issue 22): two test
# hosts (cluster.sh), 2 ranks each, memory_every 1, disk checkpoints every 50 steps. Mid-run, h1
# is killed, its /dev/shm wiped and its link cut (it does not come back). The restart finds h1
# unreachable and goes on with 2 ranks on h0 (16 = 4 x 2 x 2: the batch arithmetic holds); the
# in-memory checkpoints of the 4 ranks -- h0's own, and the replicas h0 kept of ranks 2 and 3 --
# are written to disk as the 4 ranks' checkpoint and resharded onto 2: at most two steps before
# the last step logged at the kill, not the disk's step 100. The run ends, bit for bit, on the
# weights of a run without the failure that went from 4 ranks to 2 at the same step, each step's
# metrics line once, no segment left on h0.
# Then the same with resilience.shrink off and a spare host: a third host h2 takes h1's ranks
# (4 ranks again, the same weights). Skips (77) saying why where network namespaces cannot be
# made.
#   cluster_shrink_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmshr 10.233.16
"$here/cluster.sh" up 3 2
full=/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile
hostfile=$dir/hosts  # h0 and h1 only: h2 is the spare of the last case
head -n 2 "$full" >"$hostfile"
fail() { echo "FAIL: $*"; exit 1; }
job() {  # job RUN_DIR
  cat <<EOT
name: shrink
run_dir: $1
model: {type: gpt, seq_len: 64, layers: 2, heads: 4, width: 128}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 200, global_batch: 16, micro_batch: 4, eval_every: 0, log_every: 100}
parallel: {timeout_s: ${collective_timeout_s:-5}}
checkpoint: {every: ${every:-50}, memory_every: ${memory:-1}, async: false}
resilience: {max_restarts: ${restarts:-1}, shrink: ${shrink:-true}}
EOT
}
# lose_h1 RUN_DIR AT: once the run has logged step AT, h1 is killed, wiped and cut off.
lose_h1() {
  wait_logged "$1" "$2"
  "$here/cluster.sh" kill h1
  logged "$1" >"$1.killed-at"
  "$here/cluster.sh" on h1 sh -c 'rm -f /dev/shm/ringmaster-*'
  "$here/cluster.sh" cut h1
}

# The runs without a planned fault wait longer in a collective: a 4-rank step beside other tests
# on 2 cores (or a slow fsync) may take over the 5 s that the faulty runs detect a loss within.
collective_timeout_s=60 run_on_h0 reference
ref=$(sha256sum <"$dir/reference/weights.bin")

# 1. h1 lost for good: shrink to the 2 ranks of h0, from memory.
lose_h1 "$dir/shrunk" 120 &
run_on_h0 shrunk
wait
out=$(cat "$dir/shrunk.out")
at=$(cat "$dir/shrunk.killed-at")
grep -q "going on without rmshr-h1: shrunk from 4 to 2 ranks on the 1 host left, 2 slots" <<<"$out" ||
  { echo "$out"; fail "the restart did not shrink to h0"; }
line=$(grep -o "the in-memory checkpoints of the earlier 4 ranks: step [0-9]* .*" <<<"$out") ||
  { echo "$out"; fail "the 4 ranks' in-memory checkpoints were not salvaged"; }
echo "$line"
grep -q "(old ranks 2, 3 from replicas); written to disk" <<<"$line" ||
  fail "ranks 2 and 3 did not come from the replicas on h0"
step=$(sed -E 's/.*: step ([0-9]+) .*/\1/' <<<"$line")
(( step >= at - 2 )) || fail "resumed at step $step, more than two steps before the $at logged at the kill"
grep -q "resuming from $dir/shrunk/checkpoints/step_$(printf %08d "$step") (step $step)" <<<"$out" ||
  { echo "$out"; fail "the 2 ranks did not resume from the salvaged checkpoint"; }
once_each "$dir/shrunk" 200 || fail "shrunk: metrics.jsonl does not hold steps 1..200 once each"
[[ -z $(segments h0) ]] || fail "segments left on h0: $(segments h0)"
grep -q '"event":"hosts_dropped"' "$dir/shrunk/events.jsonl" || fail "no hosts_dropped event"
# What the weights must be: the rank count changes the order in which gradients are summed, so
# not the 4-rank run's, but those of 4 ranks on h0 and h1 to step $step (a disk checkpoint every
# step, the run killed at the start of the next) and then 2 ranks on h0 from its checkpoint.
"$here/cluster.sh" heal h1
wait_answers h1
every=1 memory=0 restarts=0 collective_timeout_s=60 job "$dir/twice" >"$dir/twice.yaml"
(cd "$dir" && RM_TEST_FAULT=kill:0:$((step + 1)) timeout 400 "$here/cluster.sh" on h0 "$bin" run \
   twice.yaml --hosts "$hostfile" >twice.out 2>&1) && { cat "$dir/twice.out"; fail "the run to be killed was not"; }
# It must have been killed by the fault, after saving step $step -- not have failed to start.
[[ -d $dir/twice/checkpoints/step_$(printf %08d "$step") ]] ||
  { cat "$dir/twice.out"; fail "the 4-rank run to be killed at step $((step + 1)) did not save step $step"; }
head -n 1 "$full" >"$dir/h0-only"
(cd "$dir" && timeout 400 "$here/cluster.sh" on h0 "$bin" run twice.yaml --hosts "$dir/h0-only" \
   >twice2.out 2>&1) || { cat "$dir/twice2.out"; fail "the 2-rank continuation failed"; }
grep -q "resuming from $dir/twice/checkpoints/step_$(printf %08d "$step") (step $step)" "$dir/twice2.out" ||
  { cat "$dir/twice.out" "$dir/twice2.out"; fail "the 2-rank continuation did not start at step $step"; }
cmp -s "$dir/shrunk/weights.bin" "$dir/twice/weights.bin" ||
  fail "shrunk: the weights differ from 4 ranks to step $step and then 2"
[[ $(sha256sum <"$dir/shrunk/weights.bin") != "$ref" ]] || fail "shrunk: the 4-rank run's weights (the check above would prove nothing)"
echo "h1 lost: shrunk to 2 ranks, resumed from the memory of step $step (killed at $at), the weights of 4 ranks to $step then 2"

# 2. shrink off, a spare host in the hostfile: h2 takes h1's ranks.
cp "$full" "$hostfile"
shrink=false
lose_h1 "$dir/spare" 120 &
job "$dir/spare" >"$dir/spare.yaml"
(cd "$dir" && timeout 400 "$here/cluster.sh" on h0 "$bin" run spare.yaml --hosts "$hostfile" \
   --nproc 4 >spare.out 2>&1) || { cat "$dir/spare.out"; fail "spare: the run failed"; }
wait
out=$(cat "$dir/spare.out")
grep -q "going on without rmshr-h1: all 4 ranks on the 2 hosts left, 4 slots" <<<"$out" ||
  { echo "$out"; fail "the restart did not move h1's ranks to h2"; }
grep -q "resuming from memory" <<<"$out" || { echo "$out"; fail "the spare host's restart did not resume from memory"; }
[[ $(sha256sum <"$dir/spare/weights.bin") == "$ref" ]] || fail "spare: the weights differ"
once_each "$dir/spare" 200 || fail "spare: metrics.jsonl does not hold steps 1..200 once each"
for h in h0 h2; do [[ -z $(segments $h) ]] || fail "segments left on $h: $(segments $h)"; done
echo "h1 lost with a spare host: its ranks restarted on h2, resumed from memory, same weights"
echo PASS

#!/usr/bin/env bash
# In-memory checkpoint replicas on two test hosts (cluster.sh), 2 ranks each, memory_every 1,
# disk checkpoints every 50 steps, resilience.max_restarts 1 (worker/memory_checkpoints.h):
#  1. Every process of h1 killed mid-run and h1's /dev/shm wiped (the host and its memory lost):
#     the restart resumes from memory, ranks 2 and 3 from the replicas kept on h0, at most two
#     steps before the last step logged at the kill, and ends on the uninterrupted run's weights,
#     each step's metrics line once.
#  2. The same, with a byte flipped in both slots of the replica of rank 2 on h0: the replica is
#     refused (checksum mismatch, named), nothing in memory serves every rank, and the restart
#     takes the newest disk checkpoint instead -- again ending on the same weights.
#  3. memory_every 3, h1's ranks stopped two steps after a save, then h1 lost: resumed from that
#     save (its replica was committed once it had arrived, not at the next save).
#  4. h1's ranks stopped mid-replication (their replicas of a step posted, not sent), then h1
#     lost: resumed from the step before, whose replicas had arrived; one step recomputed.
#  5. One rank SIGKILLed mid-replication, its host kept: resumed from that step, from the ranks'
#     own segments; nothing recomputed.
# No segment is left on either host after a run ends. Skips (77) saying why when this machine
# cannot create network namespaces.
#   cluster_memory_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmmem 10.233.15
"$here/cluster.sh" up 2 2
hostfile=/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile
fail() { echo "FAIL: $*"; exit 1; }
job() {  # job RUN_DIR
  cat <<EOT
name: memory-replicas
run_dir: $1
model: {type: gpt, seq_len: 64, layers: 2, heads: 4, width: 128}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 300, global_batch: 16, micro_batch: 4, eval_every: 0, log_every: 100}
parallel: {timeout_s: ${collective_timeout_s:-5}}
checkpoint: {every: 50, memory_every: ${every:-1}}
resilience: {max_restarts: 1}
EOT
}
# lose_h1 RUN_DIR AT [PAUSE]: once the run has logged step AT (not a multiple of 50), and PAUSE
# seconds later, kills every process of h1 and wipes its segments, writing the steps logged at
# that moment to RUN_DIR.killed-at.
lose_h1() {
  wait_logged "$1" "$2"
  sleep "${3:-0}"
  "$here/cluster.sh" kill h1
  logged "$1" >"$1.killed-at"
  "$here/cluster.sh" on h1 sh -c 'rm -f /dev/shm/ringmaster-*'
}

# The runs without a planned fault wait longer in a collective: a 4-rank step beside other tests
# on 2 cores (or a slow fsync) may take over the 5 s that the faulty runs detect a loss within.
collective_timeout_s=60 run_on_h0 reference
ref=$(sha256sum <"$dir/reference/weights.bin")
grep -q "in-memory checkpoints every 1 step(s); each rank's slice also kept by a rank on the next host" \
  "$dir/reference.out" || { cat "$dir/reference.out"; fail "replicas not on"; }
for h in h0 h1; do [[ -z $(segments $h) ]] || fail "segments left on $h after a finished run: $(segments $h)"; done

# 1. h1 and its memory lost.
lose_h1 "$dir/lost" 120 &
run_on_h0 lost
wait
out=$(cat "$dir/lost.out")
at=$(cat "$dir/lost.killed-at")
line=$(grep -o "resuming from memory (step [0-9]*; disk: step [0-9]*); in memory: .*" <<<"$out") ||
  { echo "$out"; fail "the restart did not resume from memory"; }
echo "$line"
step=$(sed -E 's/resuming from memory \(step ([0-9]+);.*/\1/' <<<"$line")
(( step >= at - 2 )) || fail "resumed at step $step, more than two steps before the $at logged at the kill"
grep -q "rank 2 holds nothing (step $step from its replica on rank 0); rank 3 holds nothing (step $step from its replica on rank 1)" <<<"$line" ||
  fail "ranks 2 and 3 were not restored from their replicas on h0"
[[ $(sha256sum <"$dir/lost/weights.bin") == "$ref" ]] || fail "lost host: the weights differ from the uninterrupted run's"
once_each "$dir/lost" 300 || fail "lost host: metrics.jsonl does not hold steps 1..300 once each"
for h in h0 h1; do [[ -z $(segments $h) ]] || fail "segments left on $h: $(segments $h)"; done
echo "lost host: resumed from memory at step $step (killed at $at), replicas for ranks 2 and 3, same weights"

# 2. The same, with rank 2's replica damaged on h0: both its slots get one flipped byte.
(lose_h1 "$dir/damaged" 170
 "$here/cluster.sh" on h0 python3 - <<'PY'
import glob, os
for path in glob.glob("/dev/shm/ringmaster-*-r2-replica"):
    size = os.path.getsize(path)
    stride = (size - 4096) // 2
    with open(path, "r+b") as f:
        for offset in (4096 + 4321, 4096 + stride + 4321):
            f.seek(offset); b = f.read(1); f.seek(offset); f.write(bytes([b[0] ^ 0x20]))
    print("flipped a byte in both slots of", path)
PY
) &
run_on_h0 damaged
wait
out=$(cat "$dir/damaged.out")
grep -q "resuming from memory" <<<"$out" && { echo "$out"; fail "a damaged replica was used"; }
grep -q "replica of rank 2 slot [01] skipped: checksum mismatch" <<<"$out" ||
  { echo "$out"; fail "the damaged replica was not named"; }
grep -q "no step that every rank holds, so not from memory" <<<"$out" || { echo "$out"; fail "no fallback named"; }
grep -q "restart 1 of 1 from memory if newer, else $dir/damaged/checkpoints/step_00000150" <<<"$out" ||
  { echo "$out"; fail "the restart did not fall back to the disk checkpoint of step 150"; }
[[ $(sha256sum <"$dir/damaged/weights.bin") == "$ref" ]] || fail "damaged replica: the weights differ"
once_each "$dir/damaged" 300 || fail "damaged replica: metrics.jsonl does not hold steps 1..300 once each"
echo "damaged replica: refused and named, resumed from disk, same weights"
# 3. memory_every 3, h1's ranks stopped (SIGSTOP, RM_TEST_FAULT) at the start of step 123, two
# steps after the save at 120 sent its replicas, then h1 lost: with the replica committed as soon
# as it has arrived (poll), the restart resumes from step 120; committed only at the next save
# (which never comes), it could resume from 117 at best. The stop makes the moment exact: step
# 123 never completes, so the kill cannot land later or earlier.
every=3
stop_at=123
lose_h1 "$dir/every3" $((stop_at - 1)) 1 &
RM_TEST_FAULT=stop:2:$stop_at,stop:3:$stop_at run_on_h0 every3
wait
out=$(cat "$dir/every3.out")
line=$(grep -o "resuming from memory (step [0-9]*; disk: step [0-9]*); in memory: .*" <<<"$out") ||
  { echo "$out"; fail "every 3: the restart did not resume from memory"; }
echo "$line"
step=$(sed -E 's/resuming from memory \(step ([0-9]+);.*/\1/' <<<"$line")
(( step == stop_at - 3 )) ||
  fail "every 3: resumed at step $step, not $((stop_at - 3)) (the replica of that save was not committed)"
[[ $(sha256sum <"$dir/every3/weights.bin") == "$ref" ]] || fail "every 3: the weights differ"
once_each "$dir/every3" 300 || fail "every 3: metrics.jsonl does not hold steps 1..300 once each"
for h in h0 h1; do [[ -z $(segments $h) ]] || fail "segments left on $h: $(segments $h)"; done
echo "every 3: h1 stopped at step $stop_at and lost, resumed from memory at step $step, same weights"

# 4. h1 lost mid-replication: ranks 2 and 3 stop themselves (RM_TEST_FAULT=replstop) once their
# in-memory save of step 140 has posted its replicas, before any of it is waited for, then h1 is
# lost. Their replicas of step 140 never arrived whole, so h0 holds them at step 139: the restart
# resumes there (ranks 2 and 3 from their replicas), recomputing step 140 alone.
every=1
repl_at=140
lose_h1 "$dir/midrepl" $repl_at 1 &
RM_TEST_FAULT=replstop:2:$repl_at,replstop:3:$repl_at run_on_h0 midrepl
wait
out=$(cat "$dir/midrepl.out")
line=$(grep -o "resuming from memory (step [0-9]*; disk: step [0-9]*); in memory: .*" <<<"$out") ||
  { echo "$out"; fail "mid-replication: the restart did not resume from memory"; }
echo "$line"
grep -q "resuming from memory (step $((repl_at - 1)); disk: step 100)" <<<"$line" ||
  fail "mid-replication: not resumed at step $((repl_at - 1)), the newest step whose replicas arrived"
grep -q "rank 2 holds nothing (step $((repl_at - 1)) from its replica on rank 0)" <<<"$line" ||
  fail "mid-replication: rank 2 was not restored from its replica"
grep -q "replica of rank 2 slot [01] skipped: being received (its transfer did not finish)" <<<"$line" ||
  fail "mid-replication: the replica slot in transfer was not named"
[[ $(sha256sum <"$dir/midrepl/weights.bin") == "$ref" ]] || fail "mid-replication: the weights differ"
once_each "$dir/midrepl" 300 || fail "mid-replication: metrics.jsonl does not hold steps 1..300 once each"
for h in h0 h1; do [[ -z $(segments $h) ]] || fail "segments left on $h: $(segments $h)"; done
echo "mid-replication: h1 stopped after posting step $repl_at's replicas and lost, resumed at step $((repl_at - 1)), same weights"

# 5. Rank 2 alone SIGKILLed mid-replication (RM_TEST_FAULT=replkill), its host kept: its own slot
# of step 140 was committed before the replicas were posted, so the restart resumes at step 140
# from every rank's own segment, recomputing nothing; the replica it was receiving, never
# finished, is skipped and named.
RM_TEST_FAULT=replkill:2:$repl_at run_on_h0 replkill
out=$(cat "$dir/replkill.out")
line=$(grep -o "resuming from memory (step [0-9]*; disk: step [0-9]*); in memory: .*" <<<"$out") ||
  { echo "$out"; fail "replkill: the restart did not resume from memory"; }
echo "$line"
grep -q "resuming from memory (step $repl_at; disk: step 100)" <<<"$line" ||
  fail "replkill: not resumed at step $repl_at, the step every rank's own segment holds"
[[ $(sha256sum <"$dir/replkill/weights.bin") == "$ref" ]] || fail "replkill: the weights differ"
once_each "$dir/replkill" 300 || fail "replkill: metrics.jsonl does not hold steps 1..300 once each"
for h in h0 h1; do [[ -z $(segments $h) ]] || fail "segments left on $h: $(segments $h)"; done
echo "replkill: rank 2 killed after posting step $repl_at's replicas, resumed at step $repl_at, same weights"
echo PASS

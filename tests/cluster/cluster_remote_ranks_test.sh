#!/usr/bin/env bash
# A job whose launch host runs none of its ranks: `ringmaster run --hosts FILE` from test host h0
# (cluster.sh) with a hostfile of h1 and h2, 2 ranks each. h2's link is cut mid-run: the ranks on
# h1 fail within the collective timeout, and mpirun, waiting for ever for h2's daemon, is ended
# 20 s after a rank said it ended (base/rank_end.h; before: the launcher watched only ranks on its
# own host, saw none, and waited with mpirun for ever, a SIGTERM passed on to nobody). The restart then waits RM_HOST_WAIT_S=2 for h2 and
# the job ends with the failed attempt's code and a "failed" event. Skips (77) saying why when
# this machine cannot create network namespaces.
#   cluster_remote_ranks_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmremote 10.233.18
"$here/cluster.sh" up 3 2
fail() { echo "FAIL: $*"; exit 1; }
printf '%s slots=2\n' "$RM_CLUSTER_NAME-h1" "$RM_CLUSTER_NAME-h2" >"$dir/hostfile"
cat >"$dir/job.yaml" <<EOT
name: remote-ranks
run_dir: $dir/run
model: {type: gpt, seq_len: 64, layers: 2, heads: 4, width: 128}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 400, global_batch: 16, micro_batch: 4, eval_every: 0, log_every: 100}
parallel: {timeout_s: 5, shard: gradients}
checkpoint: {every: 50}
resilience: {max_restarts: 1}
EOT
(cd "$dir" && exec timeout -k 10 300 "$here/cluster.sh" on h0 env RM_HOST_WAIT_S=2 "$bin" run job.yaml \
   --hosts hostfile >run.out 2>&1) &
runner=$!
for _ in $(seq 900); do
  [[ -f $dir/run/metrics.jsonl && $(wc -l <"$dir/run/metrics.jsonl") -ge 120 ]] && break
  sleep 0.1
done
[[ $(wc -l <"$dir/run/metrics.jsonl" 2>/dev/null || echo 0) -ge 120 ]] ||
  { cat "$dir/run.out"; fail "the run never reached step 120"; }
grep -q "rank 0/4 (local 0/2) on $RM_CLUSTER_NAME-h1" "$dir/run/logs/rank-0.log" ||
  fail "rank 0 is not on h1: $(grep -m1 'rank ' "$dir/run/logs/rank-0.log")"
"$here/cluster.sh" cut h2
code=0
wait "$runner" || code=$?
"$here/cluster.sh" heal h2
out=$(cat "$dir/run.out")
grep -Eq "rank [0-9] ended 20 s ago and mpirun has not" <<<"$out" ||
  { echo "$out"; fail "mpirun was not ended for outliving a rank (before: the launcher waited with it for ever)"; }
grep -q "gave up after 2 s: $RM_CLUSTER_NAME-h2 still unreachable" <<<"$out" ||
  { echo "$out"; fail "no give-up message naming h2"; }
failed=$(grep -oP 'the job failed \(exit code \K[0-9]+(?=\); restart 1 of 1)' <<<"$out") ||
  { echo "$out"; fail "the attempt did not fail as expected"; }
[[ $code == "$failed" ]] || { echo "$out"; fail "exit code $code, not the failed attempt's $failed"; }
python3 -c 'import json, sys
e = json.loads(open(sys.argv[1]).read().splitlines()[-1])
sys.exit(e["event"] != "failed")' "$dir/run/events.jsonl" ||
  fail "the last event is not the failure: $(tail -n 1 "$dir/run/events.jsonl")"
echo "launch host without ranks, h2 cut: mpirun ended, the job failed with code $code and an event"
echo PASS

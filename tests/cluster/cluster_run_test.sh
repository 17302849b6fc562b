#!/usr/bin/env bash
# A job across two test hosts (cluster.sh): `ringmaster run JOB --hosts FILE` from host h0 puts
# ranks 0-1 on h0 and 2-3 on h1, takes the hierarchical path between them, trains, and ends with the same losses as the same job on four
# ranks of one host. Skips (77) saying why when this machine cannot create network namespaces.
#   cluster_run_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmrun 10.233.11
"$here/cluster.sh" up 2 2
hostfile=/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile
cat >"$dir/job.yaml" <<EOT
name: hosts
run_dir: $dir/run
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 6, eval_batches: 2, log_every: 6}
parallel: {timeout_s: 60, shard: gradients}
EOT
fail() { echo "FAIL: $*"; exit 1; }
cd "$dir"
out=$(timeout 300 "$here/cluster.sh" on h0 "$bin" run job.yaml --fresh --hosts "$hostfile" 2>&1) || {
  echo "$out"; fail "the 2-host run exited non-zero"; }
echo "$out"
grep -q "4 ranks" <<<"$out" || fail "not 4 ranks"
grep -q "collectives mpi, hierarchical: shared memory within each of 2 hosts x 2 ranks" <<<"$out" ||
  fail "the hierarchical path was not taken"
for r in 0 1 2 3; do
  host=rmrun-h$((r / 2))
  grep -q "rank $r/4 (local $((r % 2))/2) on $host" run/logs/rank-$r.log ||
    fail "rank $r is not local rank $((r % 2)) of 2 on $host: $(grep -m1 'rank ' run/logs/rank-$r.log)"
done
grep -q "step     12/12" <<<"$out" || fail "did not finish"
mv run/metrics.jsonl hosts.jsonl
out=$(timeout 300 "$bin" run job.yaml --fresh --nproc 4 2>&1) || { echo "$out"; fail "the 1-host run failed"; }
# Same samples, same order, sums in another order: equal to float rounding.
python3 - hosts.jsonl run/metrics.jsonl <<'PY' || fail "the 2-host run's losses differ from one host's"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) == 12, (len(a), len(b))
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"losses of 12 steps: 2 hosts x 2 ranks vs 1 host x 4 ranks, worst relative difference {worst:.2e}")
assert worst < 1e-5
PY
echo "PASS"

#!/usr/bin/env bash
# A real 2-node Slurm job: `srun --mpi=pmix -N 2 -n 2 ringmaster worker JOB` trains with one
# rank per node, records the Slurm job in its log, and writes weights. Skips (exit 77) when no
# Slurm cluster answers (CI starts one with ../shared/slurm/start-local-slurm).
#   slurm_srun_test.sh RINGMASTER_BIN REPO_ROOT
set -euo pipefail
bin=$1 repo=$2
source "$(dirname "$0")/slurm_lib.sh"
require_slurm
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/job.yaml" <<EOT
name: srun
run_dir: $dir/run
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: $repo/data/tinyshakespeare.txt}
train: {steps: 10, global_batch: 8, micro_batch: 4, eval_every: 5, eval_batches: 2, log_every: 5}
parallel: {timeout_s: 30, shard: gradients}
EOT
out=$(timeout 180 srun --mpi=pmix -N 2 -n 2 -t 3 "$bin" worker "$dir/job.yaml" 2>&1) || {
  echo "$out"; echo "FAIL: srun exited non-zero"; exit 1; }
echo "$out"
grep -q "2 ranks" <<<"$out" || { echo "FAIL: not 2 ranks"; exit 1; }
grep -q "slurm job [0-9]" <<<"$out" || { echo "FAIL: Slurm job id not recorded"; exit 1; }
grep -q "step     10/10" <<<"$out" || { echo "FAIL: did not finish"; exit 1; }
[[ -s $dir/run/weights.bin && $(wc -l <"$dir/run/metrics.jsonl") -eq 10 ]] || {
  echo "FAIL: weights or metrics missing"; exit 1; }
echo "PASS"

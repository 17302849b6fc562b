#!/usr/bin/env bash
# A rank that misbehaves on the hierarchical path (shared memory within hosts, MPI between them:
# collectives/mpi/hier_path.h), on 2 test hosts x 2 ranks (cluster.sh), with
# collectives_fault_worker: rank 3 is the second rank of host h1. Each job must fail fast,
# naming the job's ranks (not their numbers within a host) and, for a stall, the peer a rank
# waits for on the network:
#  - op: rank 3 asks for a sum where the others average. The in-host stage sums in every case
#    (the average is divided after the inter-host step), so it must announce what was asked;
#    before, the job completed with rank 3's slice left undivided.
#  - short: rank 3 reduces 64 elements fewer; rank 2 or 3 names both by their job ranks (before:
#    ranks 0 and 1, the numbers within host h1).
#  - stall, host-leaders layout, reduce-scatter: rank 3 sleeps; rank 1 (host h0) waits for it on
#    rail 1 and must name rank 3 (before: rank 2, the leader of h1).
# Skips (77) saying why where this machine cannot create network namespaces.
#   cluster_collectives_fault_test.sh FAULT_WORKER_BIN
set -euo pipefail
bin=$1
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmcfault 10.233.17
root=()
[[ $(id -u) == 0 ]] && root=(--allow-run-as-root)
"$here/cluster.sh" up 2 2

# job NAME ENV...: runs the worker on the 4 ranks with ENV set (RM_TEST_STALL_RANK=3 always);
# it must fail, within 60 s (a hang or the 60 s stall would pass that), output in $dir/NAME.out.
job() {
  local name=$1 t0=$SECONDS status=0
  shift
  timeout 90 "$here/cluster.sh" on h0 env RM_TEST_STALL_RANK=3 OMP_NUM_THREADS=1 \
    RM_TEST_ALGORITHM=auto RM_TEST_OPERATION=all_reduce RM_TEST_WATCH_RANK= "$@" \
    mpirun "${root[@]}" --oversubscribe --bind-to none \
    --hostfile "/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile" -np 4 \
    -x RM_TEST_FAULT -x RM_TEST_STALL_RANK -x RM_TEST_ALGORITHM -x RM_TEST_OPERATION \
    -x RM_TEST_WATCH_RANK -x OMP_NUM_THREADS "$bin" >"$dir/$name.out" 2>&1 || status=$?
  echo "== $name: exit $status after $((SECONDS - t0)) s"
  if ((status == 0)) || grep -q "all operations completed" "$dir/$name.out"; then
    cat "$dir/$name.out"
    echo "FAIL: $name: the job completed"
    exit 1
  fi
  if ((SECONDS - t0 >= 60)); then
    cat "$dir/$name.out"
    echo "FAIL: $name: the job took $((SECONDS - t0)) s to fail"
    exit 1
  fi
}

# expect NAME ERE: NAME's output must match ERE.
expect() {
  grep -Eq "$2" "$dir/$1.out" || { cat "$dir/$1.out"; echo "FAIL: $1: no line matches: $2"; exit 1; }
}

# expect_not NAME ERE: NAME's output must not match ERE.
expect_not() {
  ! grep -Eq "$2" "$dir/$1.out" || { cat "$dir/$1.out"; echo "FAIL: $1: a line matches: $2"; exit 1; }
}

job op RM_TEST_FAULT=op
expect op "rank [23] runs reduce_scatter #4 \(float, (sum|avg)\) of 262144 elements on the shared-memory path where rank [23] runs reduce_scatter #4 \(float, (sum|avg)\)"
expect op "\(float, sum\)"
expect op "\(float, avg\)"

job short RM_TEST_FAULT=short
expect short "rank [23] runs .* on the shared-memory path where rank [23] runs"
expect_not short "rank [01] runs"

job stall RM_TEST_FAULT=stall RM_TEST_ALGORITHM=leaders RM_TEST_OPERATION=reduce_scatter \
  RM_TEST_WATCH_RANK=1
expect stall "\[rank 1/4\] reduce_scatter\(seq=4, .*timed out after .*the inter-host step with rank 3 on $RM_CLUSTER_NAME-h1"
echo PASS

#!/usr/bin/env bash
# The communicator's whole correctness suite (collectives/communicator_test.cc) with its ranks on
# test hosts (cluster.sh): 2 hosts x 2 ranks, then 3 hosts x 2 ranks. There the default path is
# hierarchical (shared memory within a host, MPI between: hier_path.h) and the suite checks that
# it was taken; its leaders variant and plain MPI run too. Skips (77) saying why when this machine
# cannot create network namespaces.
#   cluster_collectives_test.sh COLLECTIVES_TEST_BIN
set -euo pipefail
bin=$1
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmcoll 10.233.12
root=()
[[ $(id -u) == 0 ]] && root=(--allow-run-as-root)
# Not the failure tests: they force the shared-memory path, which needs one host.
# Three hosts: the hierarchical variants only (every path already ran on two).
for shape in "2 2 Paths/*:ShardTest.*:BFloat16Reference.*" \
             "3 2 Paths/*/auto:Paths/*/auto_registered:Paths/*/auto_leaders"; do
  read -r hosts slots filter <<<"$shape"
  "$here/cluster.sh" up "$hosts" "$slots"
  echo "== $hosts hosts x $slots ranks"
  timeout 240 "$here/cluster.sh" on h0 env RM_EXPECT_AUTO_PATH=hierarchical OMP_NUM_THREADS=1 \
    mpirun "${root[@]}" --oversubscribe --bind-to none \
    --hostfile "/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile" -np $((hosts * slots)) \
    -x RM_EXPECT_AUTO_PATH -x OMP_NUM_THREADS "$bin" --gtest_filter="$filter" --gtest_brief=1
done
echo PASS

#!/usr/bin/env bash
# The communicator's whole correctness suite (collectives/communicator_test.cc) with its ranks on
# test hosts (cluster.sh): 2 hosts x 2 ranks, then 3 hosts x 2 ranks. There the default path is
# hierarchical (shared memory within a host, MPI between: hier_path.h) and the suite checks that
# it was taken; its leaders variant and plain MPI run too. Then hosts of 2, 2 and 4 ranks: each
# rank's own view fits the rails there, yet the hosts differ, so the suite must find plain MPI
# taken (and right). Skips (77) saying why when this machine cannot create network namespaces.
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
# Hosts of unequal rank counts, on the three hosts still up (before: the hierarchical path was
# taken, and its rails exchanged count vectors of different lengths).
uneven=/run/ringmaster-cluster/$RM_CLUSTER_NAME/uneven-hostfile
printf '%s slots=2\n%s slots=2\n%s slots=4\n' "$RM_CLUSTER_NAME-h0" "$RM_CLUSTER_NAME-h1" \
  "$RM_CLUSTER_NAME-h2" >"$uneven"
echo "== hosts of 2, 2 and 4 ranks"
timeout 240 "$here/cluster.sh" on h0 env "RM_EXPECT_AUTO_PATH=MPI collectives" OMP_NUM_THREADS=1 \
  mpirun "${root[@]}" --oversubscribe --bind-to none --hostfile "$uneven" -np 8 \
  -x RM_EXPECT_AUTO_PATH -x OMP_NUM_THREADS "$bin" --gtest_filter="Paths/*/auto" --gtest_brief=1
echo PASS

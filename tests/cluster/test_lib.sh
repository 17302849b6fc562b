# Sourced by the test-host tests (tests/cluster/*_test.sh): `cluster_test_begin NAME NET` names
# this test's cluster (its own name and /24, so tests can run side by side), skips the test (exit
# 77, saying why) where this machine cannot create the hosts, and on exit tears the cluster down
# and removes the scratch directory $dir. Sets $here (this folder) and $dir.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cluster_test_begin() {
  export RM_CLUSTER_NAME=$1 RM_CLUSTER_NET=$2
  local why
  why=$("$here/cluster.sh" check) || { echo "SKIP: $why"; exit 77; }
  dir=$(mktemp -d)
  trap '"$here/cluster.sh" down; rm -rf "$dir"' EXIT
}

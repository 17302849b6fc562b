# Sourced by the test-host tests (tests/cluster/*_test.sh): `cluster_test_begin NAME NET` names
# this test's cluster (its own name and /24, so tests can run side by side), skips the test (exit
# 77, saying why) where this machine cannot create the hosts -- or fails it where RM_REQUIRE
# names netns (CI) -- and on exit tears the cluster down and removes the scratch directory $dir.
# Any other failure of `cluster.sh check` (a bug in it: set -e, a typo) fails the test. Sets
# $here (this folder) and $dir.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../required_parts.sh"

cluster_test_begin() {
  export RM_CLUSTER_NAME=$1 RM_CLUSTER_NET=$2
  local why status=0
  why=$("$here/cluster.sh" check 2>&1) || status=$?
  case $status in
    0) ;;
    77) skip_or_fail netns "$why" ;;  # check's "this machine cannot" (see cluster.sh)
    *) echo "FAIL: cluster.sh check exited $status (not 77, its 'cannot here'): $why"; exit 1 ;;
  esac
  dir=$(mktemp -d)
  trap '"$here/cluster.sh" down; rm -rf "$dir"' EXIT
}

# run_on_h0 NAME: writes the test's `job RUN_DIR` file for $dir/NAME to $dir/NAME.yaml, trains it
# with `$bin run --hosts $hostfile` from host h0 (400 s at most), output in $dir/NAME.out; a
# failed run fails the test, showing its output.
run_on_h0() {
  job "$dir/$1" >"$dir/$1.yaml"
  (cd "$dir" && timeout 400 "$here/cluster.sh" on h0 "$bin" run "$1.yaml" --hosts "$hostfile" \
     >"$1.out" 2>&1) || { cat "$dir/$1.out"; echo "FAIL: $1: the run failed"; exit 1; }
}

# The in-memory checkpoint tests' helpers. logged RUN_DIR: the steps RUN_DIR/metrics.jsonl holds
# (0 before it exists), and wait_logged; segments HOST: this cluster's Ringmaster segments in HOST's /dev/shm;
# once_each RUN_DIR STEPS: whether metrics.jsonl holds steps 1..STEPS, each once, in order.
logged() { [[ -f $1/metrics.jsonl ]] && wc -l <"$1/metrics.jsonl" || echo 0; }
wait_logged() {  # wait_logged RUN_DIR N: until the run has logged step N (90 s at most)
  for _ in $(seq 900); do
    [[ $(logged "$1") -ge $2 ]] && return 0
    sleep 0.1
  done
}
segments() { "$here/cluster.sh" on "$1" sh -c 'ls /dev/shm | grep "^ringmaster-" || true'; }
# wait_answers HOST: until mpirun on h0 starts a process on HOST (as the launcher probes a host
# before a run), 90 s at most, else fails the test. After `cluster.sh heal` the link is up, yet
# under CI's load the first probe has gone unanswered for 15 s (a fresh run then refuses the
# host at once, by design); a test that means a healed host waits for it to answer.
wait_answers() {
  local root=() t0=$SECONDS
  [[ $(id -u) == 0 ]] && root=(--allow-run-as-root)
  while (( SECONDS - t0 < 90 )); do
    if timeout -k 2 15 "$here/cluster.sh" on h0 mpirun "${root[@]}" --host "$RM_CLUSTER_NAME-$1" \
        -np 1 true >/dev/null 2>&1; then
      (( SECONDS - t0 < 2 )) || echo "($1 answered mpirun $((SECONDS - t0)) s after it was healed)"
      return 0
    fi
    sleep 1
  done
  echo "FAIL: $1 did not answer mpirun within 90 s of its heal"
  exit 1
}
once_each() {
  python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
sys.exit(0 if steps == list(range(1, int(sys.argv[2]) + 1)) else 1)
PY
}

#!/usr/bin/env bash
# gtest_by_suite_test.sh SCRIPT FIXTURE: scripts/gtest-by-suite.sh on tests/gtest_by_suite_fixture.cc
# must report every suite with its own outcome -- the suites after one that died still run --
# and exit non-zero; and refuse a missing binary with exit 2.
set -u
script=$1 fixture=$2
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
out=$(bash "$script" "$fixture" "$logs" 60 2> /dev/null)
rc=$?
fail=0
expect() {  # expect LINE-REGEX
  if ! grep -qE "$1" <<< "$out"; then echo "missing a line matching: $1"; fail=1; fi
}
expect '^Passing PASS 2 tests$'
expect '^Failing FAIL 1: Failing\.Fails $'
expect '^Dying CRASH exit 134 in Dying\.ByASignal$'
expect '^Skipping SKIP 1: Skipping\.Skips $'
expect '^TypedPassing/0 PASS 1 tests$'
expect '^TypedPassing/1 PASS 1 tests$'
[[ $(wc -l <<< "$out") == 6 ]] || { echo "expected 6 lines"; fail=1; }
[[ $rc == 1 ]] || { echo "exit $rc, expected 1"; fail=1; }
bash "$script" "$logs/no-such-binary" "$logs" > /dev/null 2>&1
[[ $? == 2 ]] || { echo "a missing binary did not exit 2"; fail=1; }
echo "$out"
exit $fail

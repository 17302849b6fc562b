#!/usr/bin/env bash
# gtest_by_suite_test.sh SCRIPT FIXTURE: scripts/gtest-by-suite.sh on tests/gtest_by_suite_fixture.cc
# must report every suite with its own outcome -- the suites after one that died or hung still
# run -- and exit non-zero; refuse a missing binary with exit 2; and fail a suite whose tests all
# passed but whose process exited 1 afterwards (a leak report, an exit handler).
set -u
script=$1 fixture=$2
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
out=$(bash "$script" "$fixture" "$logs" 5 2> /dev/null)
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
expect '^Values/ValuePassing PASS 3 tests$'
expect '^Hanging TIMEOUT after 5 s in Hanging\.Sleeps$'
[[ $(wc -l <<< "$out") == 8 ]] || { echo "expected 8 lines"; fail=1; }
[[ $rc == 1 ]] || { echo "exit $rc, expected 1"; fail=1; }
bash "$script" "$logs/no-such-binary" "$logs" > /dev/null 2>&1
[[ $? == 2 ]] || { echo "a missing binary did not exit 2"; fail=1; }
# The passing suite again, its process ending with exit 1 after gtest's summary.
wrapper="$logs/exits-1-after"
# shellcheck disable=SC2016  # $@ and $1 are the wrapper's own, not this script's
printf '#!/bin/sh\n"%s" "$@"; [ "$1" = --gtest_list_tests ] || exit 1\n' "$fixture" > "$wrapper"
chmod +x "$wrapper"
late=$(bash "$script" "$wrapper" "$logs" 5 2> /dev/null | grep '^Passing ')
[[ $late == "Passing FAIL exit 1 with every test passed"* ]] ||
  { echo "an exit 1 after the summary was reported as: $late"; fail=1; }
echo "$out"
exit $fail

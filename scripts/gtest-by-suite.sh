#!/usr/bin/env bash
# gtest-by-suite.sh BINARY LOGDIR [TIMEOUT_S] -- runs a GoogleTest binary one test suite per
# process and prints a line per suite:
#   SUITE PASS <n> tests | SUITE FAIL <failed tests, or why> | SUITE SKIP <skipped tests> |
#   SUITE CRASH exit <code> in <the test running when it died> | SUITE TIMEOUT after <s> in <test>
# Why: on a GPU a kernel's illegal address is a sticky error that poisons the CUDA context for
# the rest of the process, so one bad kernel would fail every later test of a single run and hide
# which of them work. The GPU scripts (gpu-speed.sh, gpu-check.sh) run their test binaries
# through this. Each suite's log is LOGDIR/<binary>-<suite>.log. Exits 0 only if every suite
# passed with nothing skipped (on a GPU machine nothing may skip), 2 on bad arguments.
set -u
if [[ $# -lt 2 || ! -x $1 ]]; then
  echo "usage: gtest-by-suite.sh BINARY LOGDIR [TIMEOUT_S] (BINARY must be executable)" >&2
  exit 2
fi
bin=$1 logs=$2 limit=${3:-300}
mkdir -p "$logs"
# Suites are the unindented lines of --gtest_list_tests ("Suite." or "Typed/0.  # TypeParam = T").
mapfile -t suites < <("$bin" --gtest_list_tests 2>/dev/null | awk '/^[^ ].*\.$|^[^ ].*\.  #/ {print $1}')
if [[ ${#suites[@]} -eq 0 ]]; then
  echo "$(basename "$bin") CRASH no test suites listed"
  exit 1
fi
# names FAILED|SKIPPED LOG: the tests gtest marked so (each once), "N: first, second, third ...".
names() {
  local list
  list=$(sed -n "s/^\[  *$1  *\] \([^ ,]*\).*/\1/p" "$2" | grep -v '^[0-9]*$' | sort -u)
  [[ -z $list ]] && return
  printf '%d: %s' "$(wc -l <<< "$list")" "$(head -3 <<< "$list" | tr '\n' ' ')"
  if [[ $(wc -l <<< "$list") -gt 3 ]]; then printf '...'; fi
}
status=0
for suite in "${suites[@]}"; do
  name=${suite%.}
  log="$logs/$(basename "$bin")-${name//\//_}.log"
  rc=0
  timeout "$limit" "$bin" --gtest_filter="${suite}*" > "$log" 2>&1 || rc=$?
  failed=$(names FAILED "$log")
  skipped=$(names SKIPPED "$log")
  passed=$(grep -c '^\[       OK \]' "$log")
  last=$(grep '^\[ RUN      \]' "$log" | tail -1 | sed 's/^\[ RUN      \] //')
  if [[ $rc == 124 ]]; then
    echo "$name TIMEOUT after ${limit} s in ${last:-no test}"
    status=1
  elif [[ $rc != 0 && $rc != 1 ]] || ! grep -q '^\[==========\] .* ran\.' "$log"; then
    echo "$name CRASH exit $rc in ${last:-no test}"
    status=1
  elif [[ -n $failed ]]; then
    echo "$name FAIL $failed"
    status=1
  elif [[ $rc != 0 ]]; then  # after the summary: an environment, an exit handler, a leak report
    echo "$name FAIL exit $rc with every test passed (see $log)"
    status=1
  elif [[ -n $skipped ]]; then
    echo "$name SKIP $skipped"
    status=1
  elif [[ $passed == 0 ]]; then
    echo "$name FAIL no test ran"
    status=1
  else
    echo "$name PASS $passed tests"
  fi
done
exit $status

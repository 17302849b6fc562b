# shellcheck shell=bash
# Sourced by scripts/gpu-check.sh and scripts/gpu-speed.sh, which define
# `verdict NAME PASS|FAIL|SKIP DETAIL`: the verdicts on GPU test programs, where nothing may skip.
# (Not executable on its own.)

# suite_verdicts PREFIX BINARY LOGDIR [TIMEOUT_S]: BINARY a test suite a process
# (gtest-by-suite.sh: a kernel's illegal address poisons the CUDA context for the rest of its
# process, and would fail every later suite with it), a verdict "PREFIX SUITE" each: PASS, or FAIL
# saying what (failed tests, a skip, a crash, a timeout, an exit after the summary).
suite_verdicts() {
  local prefix=$1 lines suites suite result detail
  # Its stderr too (a usage error), of which only the suites' lines are read when there are any
  # (bash reports a test program killed by a signal there).
  lines=$(bash "$(dirname "${BASH_SOURCE[0]}")/gtest-by-suite.sh" "$2" "$3" "${4:-300}" 2>&1)
  suites=$(grep -E '^[^ ]+ (PASS|FAIL|SKIP|CRASH|TIMEOUT) ' <<< "$lines")
  if [[ -z $suites ]]; then
    verdict "$prefix" FAIL "${lines:-no output}"
    return
  fi
  while read -r suite result detail; do
    case $result in
      PASS | FAIL) verdict "$prefix $suite" "$result" "$detail" ;;
      SKIP) verdict "$prefix $suite" FAIL "skipped on a GPU machine: $detail" ;;
      *) verdict "$prefix $suite" FAIL "${result,,}: $detail" ;;
    esac
  done <<< "$suites"
}

# gtest_log_verdict NAME RC LOG: the verdict on one run of a gtest program (under mpirun or
# ctest) that ended with exit code RC and wrote LOG: every test it has must have run and passed.
gtest_log_verdict() {
  if [[ $2 != 0 ]]; then
    verdict "$1" FAIL "exit $2: $3"
  elif grep -q '\[  SKIPPED \]' "$3"; then
    verdict "$1" FAIL "tests skipped on a GPU machine: $3"
  elif ! grep -q '\[       OK \]' "$3"; then  # gtest says PASSED of 0 tests too
    verdict "$1" FAIL "no test ran: $3"
  else
    verdict "$1" PASS "$(grep -c '\[       OK \]' "$3") test runs"
  fi
}

# Sourced by shell tests that need a part of the machine they cannot provide (slurm, netns):
# `skip_or_fail PART WHY` skips the test (exit 77, ctest's SKIP_RETURN_CODE) saying why, or fails
# it (exit 1) where RM_REQUIRE (set by .ci/run, e.g. "slurm torch netns chromium") names PART.
# C++ tests: tests/required_parts.h.
skip_or_fail() {
  local required=" ${RM_REQUIRE:-} "
  required=${required//,/ }
  if [[ $required == *" $1 "* ]]; then
    echo "FAIL: required part '$1' (RM_REQUIRE=$RM_REQUIRE) is missing: $2"
    exit 1
  fi
  echo "SKIP: $2 (RM_REQUIRE=\"$1\" makes this a failure)"
  exit 77
}

// Parts of the machine a test needs but cannot provide itself (Slurm, PyTorch, network
// namespaces, Chromium). Where one is missing the test skips, saying why -- unless the run has
// declared the part required: RM_REQUIRE (set by .ci/run, e.g. "slurm torch netns chromium")
// turns that skip into a failure naming what is missing. Shell tests: tests/required_parts.sh.
// Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace rm::test {

// Whether RM_REQUIRE (words separated by spaces or commas) names `part`.
inline bool part_required(const std::string& part) {
  const char* env = std::getenv("RM_REQUIRE");
  if (env == nullptr) return false;
  std::string words(env);
  for (char& c : words) {
    if (c == ',') c = ' ';
  }
  std::istringstream in(words);
  std::string word;
  while (in >> word) {
    if (word == part) return true;
  }
  return false;
}

}  // namespace rm::test

// In a TEST body, where `part` is missing (`why` says what is missing): fails when RM_REQUIRE
// names the part, else skips.
#define RM_SKIP_UNLESS_REQUIRED(part, why)                                                       \
  do {                                                                                           \
    if (::rm::test::part_required(part)) {                                                       \
      FAIL() << "required part '" << (part) << "' (RM_REQUIRE=" << std::getenv("RM_REQUIRE")   \
             << ") is missing: " << why;                                                         \
    }                                                                                            \
    GTEST_SKIP() << why << " (RM_REQUIRE=\"" << (part) << "\" makes this a failure)";            \
  } while (0)

// Helpers for the configs tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "configs/job_loader.h"

namespace rm::testing {

// The smallest valid job; tests append or override what they exercise.
inline const char kMinimalJob[] = "data:\n  train: data/tinyshakespeare.txt\n";

// The errors load_job_from_string() throws for `text` (as "job.yaml"), one str() each; empty if
// it loads.
inline std::vector<std::string> load_errors(const std::string& text,
                                            const std::vector<std::string>& overrides = {},
                                            int dp_ranks = 1) {
  try {
    load_job_from_string(text, "job.yaml", overrides, dp_ranks);
  } catch (const JobConfigError& e) {
    std::vector<std::string> out;
    for (const ConfigError& c : e.errors) out.push_back(c.str());
    return out;
  }
  return {};
}

// The single error `text` must produce.
inline std::string one_error(const std::string& text,
                             const std::vector<std::string>& overrides = {}, int dp_ranks = 1) {
  const std::vector<std::string> errors = load_errors(text, overrides, dp_ranks);
  EXPECT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  return errors.empty() ? "" : errors[0];
}

// An absolute path of a file in the repository.
inline std::string repo_path(const std::string& relative) {
  return std::string(RM_REPO_ROOT) + "/" + relative;
}

}  // namespace rm::testing

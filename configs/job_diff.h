// What differs between two jobs, key by key, for messages that refuse one job in place of
// another ("holds a run of a different job: model.width 64 -> 128").
#pragma once

#include <string>
#include <vector>

#include "configs/job_config.h"

namespace rm {

// "KEY: A -> B" for every key of the schema (configs/schema.h) whose value differs, in schema
// order, values as the resolved job writes them.
std::vector<std::string> differing_keys(const JobConfig& a, const JobConfig& b);

// The first `most` of differing_keys joined with "; ", and "and N more" past them; "" if none.
std::string describe_differences(const JobConfig& a, const JobConfig& b, size_t most = 4);

}  // namespace rm

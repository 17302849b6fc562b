// Internal: the cross-field checks with a filter, for load_job().
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "configs/config_error.h"
#include "configs/job_config.h"

namespace rm {

// As check_job(), but a rule runs only if usable(key) holds for every key it reads: a key whose
// value was rejected still holds its default, and a rule over that default would report a
// problem the user did not write.
std::vector<ConfigError> check_job_if(const JobConfig& cfg, int dp_ranks,
                                      const std::function<bool(std::string_view key)>& usable);

}  // namespace rm

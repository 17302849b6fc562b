#include "configs/job_diff.h"

#include "configs/schema.h"
#include "configs/yaml_format.h"

namespace rm {

std::vector<std::string> differing_keys(const JobConfig& a, const JobConfig& b) {
  JobConfig x = a, y = b;  // the schema's accessors take a mutable job
  std::vector<std::string> out;
  for (const KeySpec& key : job_schema()) {
    const std::string before = yaml_text(key.field(x)), after = yaml_text(key.field(y));
    if (before != after) out.push_back(std::string(key.path) + ": " + before + " -> " + after);
  }
  return out;
}

std::string describe_differences(const JobConfig& a, const JobConfig& b, size_t most) {
  const std::vector<std::string> keys = differing_keys(a, b);
  std::string out;
  for (size_t i = 0; i < keys.size() && i < most; ++i) out += (i ? "; " : "") + keys[i];
  if (keys.size() > most) out += "; and " + std::to_string(keys.size() - most) + " more";
  return out;
}

}  // namespace rm

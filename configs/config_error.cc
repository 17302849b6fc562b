#include "configs/config_error.h"

#include <utility>

namespace rm {
namespace {

std::string join(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += (out.empty() ? "" : "\n") + e.str();
  return out;
}

}  // namespace

std::string ConfigError::str() const {
  std::string out = file;
  if (file == kOverrideSource) {
    out += " ";
  } else {
    if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(col);
    if (!out.empty()) out += ": ";
  }
  if (!key.empty()) out += key + ": ";
  return out + message;
}

JobConfigError::JobConfigError(std::vector<ConfigError> errors_in)
    : std::runtime_error(join(errors_in)), errors(std::move(errors_in)) {}

}  // namespace rm

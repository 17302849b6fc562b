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
  out += message;
  // One line, whatever the parts hold: the CLI prints one error per line and counts them, and a
  // key or value may carry a line break that no message-building site escaped -- a quoted YAML
  // key ("a\nb": 1), a --set argument with a newline in its key, a value a check quotes back
  // (cluster.time: "1\n2"). Found by configs/job_fuzz.cc.
  std::string one_line;
  one_line.reserve(out.size());
  for (const char c : out) {
    if (c == '\n') {
      one_line += "\\n";
    } else if (c == '\r') {
      one_line += "\\r";
    } else {
      one_line += c;
    }
  }
  return one_line;
}

JobConfigError::JobConfigError(std::vector<ConfigError> errors_in, std::string subject_in)
    : std::runtime_error(join(errors_in)),
      errors(std::move(errors_in)),
      subject(std::move(subject_in)) {}

}  // namespace rm

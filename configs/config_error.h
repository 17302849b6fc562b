// The errors of loading a job: one ConfigError per problem, all of them thrown together.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace rm {

// The `file` of an error found in a --set override rather than in the job file.
inline constexpr const char* kOverrideSource = "--set";

struct ConfigError {
  std::string file;  // the job file (display name), or kOverrideSource
  int line = 0;      // 1-based; 0 = no position (the key is not in the file)
  int col = 0;       // 1-based
  std::string key;   // "model.width", "data.train[1]"; "" if the error is about the whole file
  std::string message;

  // "FILE:LINE:COL: key.path: message"; without a position "FILE: key.path: message";
  // for an override "--set key.path: message". Empty parts are left out. Always one line: line
  // breaks in any part are written as \n and \r.
  std::string str() const;
};

// Thrown by load_job() with every error found, in file order, then overrides, then cross-field
// checks. what() is the errors' str() joined by '\n'.
// `subject`: what the errors are in, for the count said after them ("3 errors in the job");
// a cluster file's reader says "the cluster file".
class JobConfigError : public std::runtime_error {
 public:
  explicit JobConfigError(std::vector<ConfigError> errors, std::string subject = "the job");
  std::vector<ConfigError> errors;
  std::string subject;
};

}  // namespace rm

// InputError: the base of every exception that means "the user's input is wrong" -- a data
// file, a device the job names, a setting -- as opposed to a failure of the run. The error
// report (base/error_report.h) prints its message and exits kExitBadInput; retrying the same
// job on the same node cannot help. Folders above base/ derive their own error types from it
// (worker/data/data_error.h, worker/device_select.h), so base/ needs to know none of them.
#pragma once

#include <stdexcept>
#include <string>

namespace rm {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace rm

// The exception of io/: a failed system call or a file that is not what it must be. what()
// starts with the path concerned and ends with the reason (the errno text where there is one),
// e.g. "run/checkpoints/step_00000010.tmp/shard_00000.bin: write of 262144 bytes failed: No
// space left on device". error_code() is that errno (0 when the reason is not a system call's).
#pragma once

#include <stdexcept>
#include <string>

namespace rm {

class IoError : public std::runtime_error {
 public:
  explicit IoError(const std::string& what, int error_code = 0)
      : std::runtime_error(what), error_code_(error_code) {}
  int error_code() const { return error_code_; }

 private:
  int error_code_;
};

}  // namespace rm

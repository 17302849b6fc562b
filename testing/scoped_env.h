// Sets (or unsets) an environment variable for a scope and puts back what was there when the
// scope ends: for tests of the switches read from the environment (RM_CUDA_GRAPH,
// RM_CUDNN_ATTENTION, TMPDIR, ...), so that one test's setting never leaks into the next.
// Header-only, as temp_dir.h, so any test target can use it without linking anything.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

namespace rm::testutil {

class ScopedEnv {
 public:
  // value null: the variable is unset for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace rm::testutil

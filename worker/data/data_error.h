// DataError: the one exception type of the data layer for bad input files and bad data (an
// InputError: exit code kExitBadInput).
//
// Messages put the file first ("PATH: what is wrong") so a user can act on them without
// reading code. Programming errors (an index out of range, a negative count) throw the
// standard exceptions instead; a DataError always means "fix your data or your config".
#pragma once

#include <string>

#include "base/input_error.h"

namespace rm {

class DataError : public InputError {
 public:
  // A message that names no single file (e.g. one that lists several).
  explicit DataError(const std::string& message) : InputError(message) {}
  // "PATH: what".
  DataError(const std::string& path, const std::string& what)
      : InputError(path + ": " + what) {}
};

}  // namespace rm

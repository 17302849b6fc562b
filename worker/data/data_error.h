// DataError: the one exception type of the data layer for bad input files and bad data.
//
// Messages put the file first ("PATH: what is wrong") so a user can act on them without
// reading code. Programming errors (an index out of range, a negative count) throw the
// standard exceptions instead; a DataError always means "fix your data or your config".
#pragma once

#include <stdexcept>
#include <string>

namespace rm {

class DataError : public std::runtime_error {
 public:
  // A message that names no single file (e.g. one that lists several).
  explicit DataError(const std::string& message) : std::runtime_error(message) {}
  // "PATH: what".
  DataError(const std::string& path, const std::string& what)
      : std::runtime_error(path + ": " + what) {}
};

}  // namespace rm

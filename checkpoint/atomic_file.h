// Crash-safe file replacement: write a temporary file beside the target, fsync it, rename it
// over the target and fsync the directory, so a crash at any moment leaves either the old file
// or the complete new one, never a torn mix (the LevelDB SetCurrentFile recipe).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace rm {

// An I/O failure; what() starts with the path.
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Atomically replaces `path` with `size` bytes of `data`. Throws IoError.
void write_file_atomic(const std::string& path, const void* data, size_t size);

// fsyncs a directory so that renames and creations inside it are durable. Throws IoError.
void fsync_directory(const std::string& dir);

// Reads a whole file. Throws IoError naming the file.
std::string read_file(const std::string& path);

}  // namespace rm

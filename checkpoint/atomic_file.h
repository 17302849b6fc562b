// Crash-safe file replacement: write a temporary file beside the target, fsync it, rename it
// over the target and fsync the directory, so a crash at any moment leaves either the old file
// or the complete new one, never a torn mix (the LevelDB SetCurrentFile recipe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_error.h"

namespace rm {

// An I/O failure; what() starts with the path and ends with the errno text. A CheckpointError,
// so callers of checkpoint/ catch one type; still a std::runtime_error as before.
class IoError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// Atomically replaces `path` with `size` bytes of `data`. Throws IoError.
void write_file_atomic(const std::string& path, const void* data, size_t size);

// fsyncs a directory so that renames and creations inside it are durable. Throws IoError.
void fsync_directory(const std::string& dir);

// Reads a whole regular file of at most `max_bytes`. A directory, device or FIFO ("not a regular
// file") and a larger file are refused before anything is read, so nothing reads forever or
// allocates what the file's size does not justify. Throws IoError naming the file.
std::string read_file(const std::string& path, uint64_t max_bytes = UINT64_MAX);

// The same recipe for content produced piece by piece (a safetensors export of several GiB
// should not be gathered into one string first). Bytes go straight from the caller's buffers to
// write(2). Until commit() the target is untouched; destroying an uncommitted writer removes the
// temporary file. Not thread-safe. Every method throws IoError.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void append(const void* data, size_t size);
  // fsync, close, rename over the target, fsync the directory. Call at most once.
  void commit();

 private:
  void abandon();  // close and unlink the temporary file, ignoring errors

  std::string path_, tmp_;
  int fd_ = -1;
};

}  // namespace rm

// MappedFile: a whole file mapped read-only, owned by one move-only object.
//
// Move-only so that a mapping is never duplicated or unmapped twice by accident; moving keeps
// the mapped address, so raw pointers into data() stay valid while the owner moves around
// (TokenSource relies on this). The file descriptor is closed right after mmap; the mapping
// keeps the file alive.
//
// The file must not be truncated while mapped: reading a page past the new end raises SIGBUS.
// The process then ends with one line naming the file, exit code 2 when the file is shorter than
// mapped (or gone), else 1 (the read failed: EIO, an NFS timeout). A SIGBUS handler, installed
// with the first mapping, knows the mappings' address ranges; a SIGBUS anywhere else goes on to
// the handler before it, or kills the process as it would have.
// Const methods are thread-safe.
#pragma once

#include <stdint.h>

#include <string>

namespace rm {

class MappedFile {
 public:
  // Maps `path`. Throws DataError "PATH: cannot open: <strerror>" if it cannot be opened, and
  // "PATH: a FIFO, not a regular file" (a directory, a character device, ...) without waiting
  // for a FIFO's writer. An empty file maps to data() == nullptr, size() == 0.
  static MappedFile open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace rm

// Crash-safe file replacement, the one implementation every writer uses: write a temporary file
// beside the target, fsync it, rename it over the target and fsync the directory, so a crash or
// a power cut at any moment leaves either the old file or the complete new one, never a torn
// mix (the LevelDB SetCurrentFile recipe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "io/io_error.h"

namespace rm {

enum class Durability {
  kDurable,      // survives a power cut once commit() returns: fsync file, rename, fsync dir
  kVisibleOnly,  // appears whole or not at all to other processes; no fsyncs, so a power cut
                 // may lose it (for files that are made durable later by a directory fsync of
                 // their own, e.g. the shard descriptors of a checkpoint)
};

// Atomically replaces `path` with `size` bytes of `data`. Throws IoError.
void write_file_atomic(const std::string& path, const void* data, size_t size,
                       Durability durability = Durability::kDurable);

// The same recipe for content produced piece by piece (a safetensors export of several GiB
// should not be gathered into one string first). Bytes go straight from the caller's buffers to
// write(2). Until commit() the target is untouched; destroying an uncommitted writer removes the
// temporary file, as does a failure inside append() or commit(). The temporary file is
// "<path>.tmp.<pid>" (or, where that name is too long, ".tmp.<pid>.<hash>" in the same
// directory), so two processes never share one. Not thread-safe. Throws IoError.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path, Durability durability = Durability::kDurable);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void append(const void* data, size_t size);
  // Overwrites `size` bytes already appended at `offset` (a header whose checksum is known only
  // once the rest is written), then appends again at the end. Before commit() only: commit()'s
  // fsync then covers these bytes like the rest, which is what the power-cut model of io/ (a
  // file's durable prefix is fixed by its fsyncs) relies on.
  void rewrite(uint64_t offset, const void* data, size_t size);
  // [fsync], close, rename over the target, [fsync the directory]. Call at most once.
  void commit();

 private:
  void abandon() noexcept;  // close and unlink the temporary file, ignoring errors

  std::string path_, tmp_;
  Durability durability_;
  int fd_ = -1;
};

}  // namespace rm

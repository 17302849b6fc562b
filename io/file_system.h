// The one seam between Ringmaster and the file system's mutating calls, so that a test can put
// a fault-injecting implementation (fault_file_system.h) under every writer: checkpoint shards
// and manifests, retention, weights.bin, safetensors exports, token shards, config.yaml,
// metrics.jsonl and events.jsonl. The LevelDB/RocksDB "Env" idea, at the level of system calls.
//
// Contract: each method behaves as the POSIX call it is named after: it returns 0 (or the
// descriptor, or the byte count) on success and -1 with errno set on failure, never throws, and
// is safe to call from any thread. Only calls that change what is on disk (or what survives a
// power cut) are here; reads, stat and readdir go straight to the kernel (posix_io.cc).
//
// The process-wide instance is the plain POSIX one unless a test installs another with
// ScopedFileSystem, or the ringmaster binary is started with RM_TEST_IO_FAULT set
// (install_file_system_from_env, fault_file_system.h).
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace rm {
namespace io {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  virtual int open(const char* path, int flags, mode_t mode) = 0;  // open(2)
  virtual ssize_t write(int fd, const void* data, size_t size) = 0;
  virtual int fsync(int fd) = 0;  // a file or a directory opened with open()
  virtual int close(int fd) = 0;
  virtual int rename(const char* from, const char* to) = 0;
  // renameat2(RENAME_EXCHANGE): swaps two existing entries atomically. EINVAL/ENOSYS/ENOTSUP
  // where the file system cannot (the caller falls back to two renames).
  virtual int exchange(const char* a, const char* b) = 0;
  virtual int unlink(const char* path) = 0;
  virtual int mkdir(const char* path, mode_t mode) = 0;
  virtual int rmdir(const char* path) = 0;
  // A marker for tests ("commit:done"): the fault layer journals it between the calls it
  // separates; the plain file system ignores it.
  virtual void note(const char* /*text*/) {}
};

// The system calls themselves.
class PosixFileSystem : public FileSystem {
 public:
  int open(const char* path, int flags, mode_t mode) override;
  ssize_t write(int fd, const void* data, size_t size) override;
  int fsync(int fd) override;
  int close(int fd) override;
  int rename(const char* from, const char* to) override;
  int exchange(const char* a, const char* b) override;
  int unlink(const char* path) override;
  int mkdir(const char* path, mode_t mode) override;
  int rmdir(const char* path) override;
};

// The instance every writer uses.
FileSystem& fs();

// Installs `replacement` for its lifetime (tests); restores the previous one on destruction.
// Not thread-safe with respect to I/O in flight: install before the writers start.
class ScopedFileSystem {
 public:
  explicit ScopedFileSystem(FileSystem* replacement);
  ~ScopedFileSystem();
  ScopedFileSystem(const ScopedFileSystem&) = delete;
  ScopedFileSystem& operator=(const ScopedFileSystem&) = delete;

 private:
  FileSystem* previous_;
};

}  // namespace io
}  // namespace rm

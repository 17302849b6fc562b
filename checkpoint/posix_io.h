// Checked POSIX file operations for checkpoint/ (internal). Every failure throws IoError
// "<path>: <what>: <strerror(errno)>", so no return code goes unchecked at the call sites.
// Stateless and thread-safe (each call works on its own descriptor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rm {
namespace io {

// An owned file descriptor, closed (errors ignored) on destruction. Use close_checked() where
// the close result matters (after writing).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close_checked(const std::string& path);

 private:
  int fd_ = -1;
};

[[noreturn]] void throw_errno(const std::string& path, const std::string& what, int err);

Fd open_read(const std::string& path);  // never waits: a FIFO opens at once (and is no file)
Fd open_write_truncate(const std::string& path);  // create or truncate, mode 0644
void write_all(int fd, const void* data, size_t size, const std::string& path);
// Reads exactly `size` bytes at `offset`; a file that ends early is an error, not a short read.
void pread_exact(int fd, void* data, size_t size, uint64_t offset, const std::string& path);
void fsync_fd(int fd, const std::string& path);
uint64_t regular_file_size(int fd, const std::string& path);  // fstat; rejects non-regular

bool exists(const std::string& path);        // lstat succeeds
bool is_directory(const std::string& path);  // stat, follows symlinks
bool is_regular_file(const std::string& path);
// mkdir, tolerating an existing directory (several ranks may race to create the same one).
void make_dir(const std::string& path);
std::vector<std::string> list_dir(const std::string& path);  // without "." and ".."
void unlink_file(const std::string& path);                   // ENOENT is not an error
void rename_path(const std::string& from, const std::string& to);
// Makes `path` appear complete or not at all (temporary file + rename) WITHOUT fsync: for files
// that only need to be visible to other processes, not durable (the shard descriptors).
void write_file_visible(const std::string& path, const std::string& bytes);
// Removes a directory tree: files first, then the directories, never following symlinks
// (a symlink is removed, not its target); then fsyncs the parent so the removal is durable.
void remove_tree(const std::string& path);
int64_t mtime_unix(const std::string& path);

std::string join(const std::string& dir, const std::string& name);
std::string parent_dir(const std::string& path);
std::string base_name(const std::string& path);

}  // namespace io
}  // namespace rm

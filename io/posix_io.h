// Checked file operations, the layer every Ringmaster reader and writer goes through. Every
// failure throws IoError "<path>: <what>: <strerror(errno)>", so no return code goes unchecked
// at the call sites. Calls that change the disk go through fs() (file_system.h), so a test can
// inject faults under all of them; reads go straight to the kernel.
// Stateless and thread-safe (each call works on its own descriptor).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/io_error.h"

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

// ---- reading -----------------------------------------------------------------------------
Fd open_read(const std::string& path);  // never waits: a FIFO opens at once (and is no file)
// fstat; refuses anything but a regular file with IoError "<path>: a FIFO, not a regular file"
// (or a directory, a character device, ...). Returns the size.
uint64_t regular_file_size(int fd, const std::string& path);
// Reads exactly `size` bytes at `offset`; a file that ends early is an error, not a short read.
void pread_exact(int fd, void* data, size_t size, uint64_t offset, const std::string& path);
// Reads a whole regular file of at most `max_bytes`. A directory, device or FIFO and a larger
// file are refused before anything is read or allocated, so nothing reads forever and no
// allocation exceeds what the limit allows. Messages: "<path>: cannot open: <errno text>",
// "<path>: a FIFO, not a regular file", "<path>: N bytes, more than the M this file may have".
std::string read_file(const std::string& path, uint64_t max_bytes = UINT64_MAX);
// What a non-regular file is, for messages: "a directory", "a FIFO", "a character device", ...
const char* file_kind(mode_t mode);

// ---- writing -----------------------------------------------------------------------------
Fd open_write_truncate(const std::string& path);  // create or truncate, mode 0644
// A new file, mode 0644, never one that is there: a name already taken (a temporary file of a
// dead process whose pid came round again, or a symlink planted at it, which O_TRUNC would
// follow and truncate whatever it points to) is unlinked and the file created anew.
Fd create_new(const std::string& path);
Fd open_append(const std::string& path);  // create if missing, O_APPEND, 0644; regular files only
void write_all(int fd, const void* data, size_t size, const std::string& path);
void seek_to(int fd, off_t offset, const std::string& path);  // lseek(SEEK_SET)
void fsync_fd(int fd, const std::string& path);
// fsyncs a directory so that the creations, renames and removals inside it are durable.
void fsync_directory(const std::string& dir);

// ---- names -------------------------------------------------------------------------------
bool exists(const std::string& path);        // lstat succeeds
bool is_directory(const std::string& path);  // stat, follows symlinks
bool is_regular_file(const std::string& path);
// mkdir, tolerating an existing directory (several ranks may race to create the same one).
// Returns whether this call created it. The new entry is durable only once its parent is
// fsynced: see make_dirs_durable.
bool make_dir(const std::string& path);
// mkdir -p that survives a power cut: creates every missing directory of `path`, and fsyncs the
// parent of each one it created (a directory whose own entry was never synced can vanish with
// everything committed inside it). Existing components' parents are fsynced too, best effort:
// a process that died between its mkdir and that fsync leaves a directory no one can tell from
// a durable one.
void make_dirs_durable(const std::string& path);
std::vector<std::string> list_dir(const std::string& path);  // without "." and ".."
void unlink_file(const std::string& path);                   // ENOENT is not an error
void rename_path(const std::string& from, const std::string& to);
// Makes `link` a symbolic link to `target` (relative to the link's directory, so a moved tree
// keeps it), replacing whatever link was there in one rename, then fsyncs the directory. Not
// through the FileSystem seam (file_system.h): only for derived pointers that the next writer
// makes again from durable state (checkpoints/best, retention.h), never for what a resume needs.
void replace_symlink(const std::string& target, const std::string& link);
// Whether `name` is the scratch link replace_symlink makes beside `link_name` before its rename
// ("best.tmp.4242" beside "best"), which a crash between the two leaves behind.
bool is_symlink_scratch(const std::string& name, const std::string& link_name);
// Swaps two existing entries atomically (renameat2 RENAME_EXCHANGE); false where the file
// system cannot, and then nothing changed.
bool exchange_paths(const std::string& a, const std::string& b);
// Removes a directory tree: files first, then the directories, never following symlinks
// (a symlink is removed, not its target); then fsyncs the parent so the removal is durable.
void remove_tree(const std::string& path);
int64_t mtime_unix(const std::string& path);
// What tells one version of a file from another on this host: a file replaced (a rename onto its
// name: another inode) or rewritten in place (another mtime or size). stat, following links.
struct FileVersion {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const FileVersion& o) const { return !(*this == o); }
};
FileVersion file_version(const std::string& path);

std::string join(const std::string& dir, const std::string& name);
std::string parent_dir(const std::string& path);
std::string base_name(const std::string& path);

}  // namespace io
}  // namespace rm

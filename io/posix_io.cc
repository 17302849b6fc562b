#include "io/posix_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "io/file_system.h"

namespace rm {
namespace io {

void throw_errno(const std::string& path, const std::string& what, int err) {
  throw IoError(path + ": " + what + ": " + std::strerror(err), err);
}

Fd::~Fd() {
  if (fd_ >= 0) fs().close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) fs().close(fd_);
    fd_ = other.release();
  }
  return *this;
}

void Fd::close_checked(const std::string& path) {
  // On Linux the descriptor is released even when close fails, so never retry it.
  if (fd_ >= 0 && fs().close(release()) != 0) throw_errno(path, "close failed", errno);
}

namespace {

// For a descriptor opened O_NONBLOCK only so that the open of a FIFO cannot wait: its reads and
// writes block as usual from now on.
void clear_nonblock(int fd, const std::string& path) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw_errno(path, "fcntl failed", errno);
  }
}

}  // namespace

Fd open_read(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, before regular_file_size()
  // could refuse it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) throw_errno(path, "cannot open", errno);
  clear_nonblock(fd.get(), path);
  return fd;
}

Fd open_write_truncate(const std::string& path) {
  const int fd = fs().open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno(path, "cannot create", errno);
  return Fd(fd);
}

Fd create_new(const std::string& path) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = fs().open(path.c_str(), kFlags, 0644);
  if (fd < 0 && errno == EEXIST && fs().unlink(path.c_str()) == 0) {
    fd = fs().open(path.c_str(), kFlags, 0644);
  }
  if (fd < 0) throw_errno(path, "cannot create", errno);
  return Fd(fd);
}

Fd open_append(const std::string& path) {
  // O_NONBLOCK: a FIFO at `path` would otherwise hold the open until a reader came (a run hung
  // at its first event); without one it fails at once (ENXIO). Only a regular file is appended
  // to; the flag is cleared after the check, so writes block as usual.
  Fd fd(fs().open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644));
  if (!fd.valid()) {
    const int err = errno;
    struct stat st;
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0) {
      throw IoError(path + ": " + file_kind(st.st_mode) + ", not a regular file");
    }
    throw_errno(path, "cannot open for appending", err);
  }
  regular_file_size(fd.get(), path);
  clear_nonblock(fd.get(), path);
  return fd;
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = fs().write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(path, "write of " + std::to_string(size) + " bytes failed", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void seek_to(int fd, off_t offset, const std::string& path) {
  if (::lseek(fd, offset, SEEK_SET) != offset) {
    throw_errno(path, "seek to byte " + std::to_string(offset) + " failed", errno);
  }
}

void pread_exact(int fd, void* data, size_t size, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(path, "read at byte " + std::to_string(offset) + " failed", errno);
    }
    if (n == 0) {
      throw IoError(path + ": file ends at byte " + std::to_string(offset) + ", " +
                    std::to_string(size) + " more bytes expected (truncated while reading?)");
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void fsync_fd(int fd, const std::string& path) {
  if (fs().fsync(fd) != 0) throw_errno(path, "fsync failed", errno);
}

void fsync_directory(const std::string& dir) {
  Fd fd(fs().open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0));
  if (!fd.valid()) throw_errno(dir, "cannot open directory", errno);
  if (fs().fsync(fd.get()) == 0) return;
  const int err = errno;
  // Some file systems cannot fsync a directory at all (vboxsf, some 9p and CIFS mounts: EINVAL,
  // or ENOTSUP): every durable write failed there, so no run could start. As PostgreSQL does,
  // go on, and say once that renames there are not durable across a power cut.
  if (err == EINVAL || err == ENOTSUP) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      std::fprintf(stderr,
                   "ringmaster: warning: %s: this file system cannot fsync a directory (%s): "
                   "files are written whole, but a power cut may undo their last renames\n",
                   dir.c_str(), std::strerror(err));
    }
    return;
  }
  throw_errno(dir, "fsync failed", err);
}

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

uint64_t regular_file_size(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw_errno(path, "fstat failed", errno);
  if (!S_ISREG(st.st_mode)) {
    throw IoError(path + ": " + file_kind(st.st_mode) + ", not a regular file");
  }
  return static_cast<uint64_t>(st.st_size);
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  // Size first, so that /dev/zero, a FIFO or a huge file costs nothing; then exactly that much.
  Fd fd = open_read(path);
  const uint64_t size = regular_file_size(fd.get(), path);
  if (size > max_bytes) {
    throw IoError(path + ": " + std::to_string(size) + " bytes, more than the " +
                  std::to_string(max_bytes) + " this file may have");
  }
  std::string text(size, '\0');
  pread_exact(fd.get(), text.data(), text.size(), 0, path);
  return text;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool make_dir(const std::string& path) {
  if (fs().mkdir(path.c_str(), 0755) == 0) return true;
  const int err = errno;
  if (err == EEXIST && is_directory(path)) return false;
  if (err == EEXIST) {
    throw IoError(path + ": cannot create directory: it exists and is not a directory", ENOTDIR);
  }
  throw_errno(path, "cannot create directory", err);
}

namespace {
// An existing directory may be one that an earlier process created and then died before it
// fsynced the parent: it is there now, yet a power cut would take it away with everything
// committed inside it since, and nothing tells it from a durable one. So the parent of every
// existing component, up to the root, is fsynced as well, once per process: `durable` holds the
// directories whose entries this process has made durable (with their ancestors'), created or
// found. Best effort: a parent this process may not open (no read permission) or not fsync is
// left as it is; the caller's own commits fsync, and report, what they write.
std::mutex durable_mutex;
std::set<std::string> durable;

void sync_existing_entries(const std::string& path) {
  std::lock_guard<std::mutex> lock(durable_mutex);
  for (std::string p = path, parent = parent_dir(p); parent != p;
       p = parent, parent = parent_dir(p)) {
    if (!durable.insert(p).second) return;
    try {
      fsync_directory(parent);
    } catch (const IoError&) {
    }
  }
}

void make_dirs_durable_from_root(const std::string& path) {
  if (is_directory(path)) {
    sync_existing_entries(path);
    return;
  }
  const std::string parent = parent_dir(path);
  if (parent != path) make_dirs_durable_from_root(parent);
  if (make_dir(path)) {
    fsync_directory(parent);
    std::lock_guard<std::mutex> lock(durable_mutex);
    durable.insert(path);
  }
}
}  // namespace

void make_dirs_durable(const std::string& path) {
  try {
    make_dirs_durable_from_root(path);
  } catch (const IoError& e) {
    // The failing component may be an ancestor; the user asked for `path`, so name it first.
    if (std::string(e.what()).rfind(path + ":", 0) == 0) throw;
    throw IoError("cannot create directory " + path + ": " + e.what(), e.error_code());
  }
}

std::vector<std::string> list_dir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) throw_errno(path, "cannot open directory", errno);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir);
    if (e == nullptr) {
      const int err = errno;
      ::closedir(dir);
      if (err != 0) throw_errno(path, "cannot read directory", err);
      return names;
    }
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
}

void unlink_file(const std::string& path) {
  if (fs().unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw_errno(path, "cannot delete", errno);
  }
}

void rename_path(const std::string& from, const std::string& to) {
  if (fs().rename(from.c_str(), to.c_str()) != 0) {
    throw_errno(from, "cannot rename to " + to, errno);
  }
}

namespace {
constexpr const char kSymlinkScratch[] = ".tmp.";  // LINK.tmp.PID
}  // namespace

bool is_symlink_scratch(const std::string& name, const std::string& link_name) {
  const std::string prefix = link_name + kSymlinkScratch;
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         name.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
}

void replace_symlink(const std::string& target, const std::string& link) {
  const std::string tmp = link + kSymlinkScratch + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a leftover of an interrupted call of this process id
  if (::symlink(target.c_str(), tmp.c_str()) != 0) {
    throw_errno(tmp, "cannot make a symbolic link to " + target, errno);
  }
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(tmp, "cannot rename to " + link, e);
  }
  const size_t slash = link.find_last_of('/');
  fsync_directory(slash == std::string::npos ? "." : slash == 0 ? "/" : link.substr(0, slash));
}

bool exchange_paths(const std::string& a, const std::string& b) {
  if (fs().exchange(a.c_str(), b.c_str()) == 0) return true;
  if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) return false;
  throw_errno(a, "cannot exchange with " + b, errno);
}

namespace {

void remove_tree_no_sync(const std::string& path, int depth) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw_errno(path, "cannot stat", errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    unlink_file(path);
    return;
  }
  // Checkpoint directories are flat; the bound only guards against a pathological tree.
  if (depth > 16) throw IoError(path + ": directory tree too deep to remove");
  for (const std::string& name : list_dir(path)) remove_tree_no_sync(join(path, name), depth + 1);
  if (fs().rmdir(path.c_str()) != 0 && errno != ENOENT) {
    throw_errno(path, "cannot remove directory", errno);
  }
}

}  // namespace

void remove_tree(const std::string& path) {
  remove_tree_no_sync(path, 0);
  fsync_directory(parent_dir(path));
}

int64_t mtime_unix(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw_errno(path, "cannot stat", errno);
  return static_cast<int64_t>(st.st_mtime);
}

FileVersion file_version(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw_errno(path, "cannot stat", errno);
  FileVersion v;
  v.device = static_cast<uint64_t>(st.st_dev);
  v.inode = static_cast<uint64_t>(st.st_ino);
  v.size = static_cast<uint64_t>(st.st_size);
  v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return v;
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string parent_dir(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace io
}  // namespace rm

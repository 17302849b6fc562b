#include "checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "checkpoint/posix_io.h"

namespace rm {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IoError(path + ": " + what + ": " + std::strerror(errno));
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir, "cannot open directory");
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    fail(dir, "fsync failed");
  }
  ::close(fd);
}

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(tmp_, "cannot create");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) abandon();
}

void AtomicFileWriter::abandon() {
  const int e = errno;  // keep the errno of the failure being reported
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  errno = e;
}

void AtomicFileWriter::append(const void* data, size_t size) {
  if (fd_ < 0) throw IoError(tmp_ + ": append after commit or failure");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon();
      fail(tmp_, "write failed");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw IoError(tmp_ + ": commit after commit or failure");
  if (::fsync(fd_) != 0) {
    abandon();
    fail(tmp_, "fsync failed");
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    abandon();
    fail(tmp_, "close failed");
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    abandon();
    fail(path_, "rename failed");
  }
  fsync_directory(parent_dir(path_));
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  AtomicFileWriter out(path);
  out.append(data, size);
  out.commit();
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  // Size first, so that /dev/zero, a FIFO or a huge file costs nothing; then exactly that much.
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  if (size > max_bytes) {
    throw IoError(path + ": " + std::to_string(size) + " bytes, more than the " +
                  std::to_string(max_bytes) + " this file may have");
  }
  std::string text(size, '\0');
  io::pread_exact(fd.get(), text.data(), text.size(), 0, path);
  return text;
}

}  // namespace rm

#include "configs/job_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "configs/yaml_guard.h"

namespace rm {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

std::string cannot_read(const std::string& why) {
  return "cannot read job file: " + why;
}

// Closes the descriptor on every path out of read_job_file().
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

std::string read_job_file(const std::string& path, std::string* text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return cannot_read(std::strerror(errno));
  const FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return cannot_read(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return cannot_read(std::strerror(EISDIR));
  if (!S_ISREG(st.st_mode)) {
    return cannot_read(std::string(file_kind(st.st_mode)) + ", not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxJobBytes) return job_too_large(st.st_size);

  // One byte more than allowed: a file that grew since fstat is caught, not read on and on.
  // Not zero-filled: only the pages the read writes are touched.
  const size_t capacity = kMaxJobBytes + 1;
  const std::unique_ptr<char[]> buf(new char[capacity]);
  size_t got = 0;
  while (got < capacity) {
    const ssize_t n = ::read(fd, buf.get() + got, capacity - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cannot_read(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxJobBytes) {
    return "too large for a job file: it grew past the limit of " + std::to_string(kMaxJobBytes) +
           " bytes (1 MiB) while being read";
  }
  text->assign(buf.get(), got);
  return "";
}

}  // namespace rm

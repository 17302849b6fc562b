#include "fuzz/scratch_dir.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "testing/temp_dir.h"

namespace rm::fuzz {
namespace {

std::string base_dir() {
  if (const char* s = ::getenv("RM_FUZZ_SCRATCH"); s != nullptr && *s != '\0') return s;
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) return "/dev/shm";
  if (const char* t = ::getenv("TMPDIR"); t != nullptr && *t != '\0') return t;
  return "/tmp";
}

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

const std::string& scratch_dir() {
  static const testutil::TempDir scratch("rm_fuzz", base_dir());  // removed at exit
  return scratch.path();
}

std::string write_scratch_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "cannot open");
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(path, "cannot close");
  return path;
}

}  // namespace rm::fuzz

#include "checkpoint/checkpoint_pin.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace rm {
namespace {

std::atomic<int> read_pause_ms{0};

// Plain system calls, not io::fs(): a lock changes nothing on disk and dies with its process, so
// the fault layer (which journals and counts what a power cut or a crash would lose) has no part
// in it.
io::Fd open_directory(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return io::Fd(fd);
}

bool same_file(int fd, const std::string& path) {
  struct stat held, named;
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

}  // namespace

std::optional<CheckpointPin> CheckpointPin::take(const std::string& ckpt_dir) {
  char* real = ::realpath(ckpt_dir.c_str(), nullptr);
  if (real == nullptr) {
    if (errno == ENOENT) return std::nullopt;
    return CheckpointPin(io::Fd(), ckpt_dir);
  }
  const std::string path = real;
  std::free(real);
  io::Fd fd = open_directory(path);
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    return CheckpointPin(io::Fd(), path);
  }
  int locked;
  do {
    // Blocks only while retention renames the directory away (it never waits for a lock itself).
    locked = ::flock(fd.get(), LOCK_SH);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) return CheckpointPin(io::Fd(), path);
  if (!same_file(fd.get(), path)) return std::nullopt;
  return CheckpointPin(std::move(fd), path);
}

bool CheckpointPin::still_there() const {
  if (fd_.valid()) return same_file(fd_.get(), path_);
  struct stat st;
  return ::stat(path_.c_str(), &st) == 0;
}

bool claim_for_removal(const std::string& ckpt_dir, io::Fd* claim) {
  *claim = open_directory(ckpt_dir);
  if (!claim->valid()) return true;
  int locked;
  do {
    locked = ::flock(claim->get(), LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0 && errno == EWOULDBLOCK) {
    *claim = io::Fd();
    return false;
  }
  if (locked != 0) *claim = io::Fd();  // no lock support: remove as without pins
  return true;
}

void set_read_pause_ms_for_tests(int ms) {
  read_pause_ms.store(ms);
}

void pause_before_reading_for_tests() {
  const int ms = read_pause_ms.load();
  if (ms <= 0) return;
  // For the tests to see that the pin is held (and so when to act on the checkpoint).
  std::fprintf(stderr, "ringmaster: RM_TEST_READ_PAUSE_MS: pinned, reading in %d ms\n", ms);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace rm

#include "io/file_system.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace rm {
namespace io {
namespace {

PosixFileSystem g_posix;
std::atomic<FileSystem*> g_current{&g_posix};

}  // namespace

int PosixFileSystem::open(const char* path, int flags, mode_t mode) {
  return ::open(path, flags, mode);
}
ssize_t PosixFileSystem::write(int fd, const void* data, size_t size) {
  return ::write(fd, data, size);
}
int PosixFileSystem::fsync(int fd) {
  return ::fsync(fd);
}
int PosixFileSystem::close(int fd) {
  return ::close(fd);
}
int PosixFileSystem::rename(const char* from, const char* to) {
  return ::rename(from, to);
}
int PosixFileSystem::exchange(const char* a, const char* b) {
  return ::renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}
int PosixFileSystem::unlink(const char* path) {
  return ::unlink(path);
}
int PosixFileSystem::mkdir(const char* path, mode_t mode) {
  return ::mkdir(path, mode);
}
int PosixFileSystem::rmdir(const char* path) {
  return ::rmdir(path);
}

FileSystem& fs() {
  return *g_current.load(std::memory_order_acquire);
}

ScopedFileSystem::ScopedFileSystem(FileSystem* replacement)
    : previous_(g_current.exchange(replacement, std::memory_order_acq_rel)) {}

ScopedFileSystem::~ScopedFileSystem() {
  g_current.store(previous_, std::memory_order_release);
}

}  // namespace io
}  // namespace rm

#include "io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <functional>
#include <utility>

#include "io/file_system.h"
#include "io/posix_io.h"

namespace rm {

namespace {

// "<path>.tmp.<pid>"; where that name would pass NAME_MAX (255 bytes) though the target's does
// not, ".tmp.<pid>.<hash of the name>" beside it (a legal -o name of 250 bytes failed with "File
// name too long", naming the temporary file).
std::string temporary_name(const std::string& path) {
  const std::string suffix = ".tmp." + std::to_string(::getpid());
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  if (path.size() - base + suffix.size() <= 255) return path + suffix;
  return path.substr(0, base) + suffix + "." + std::to_string(std::hash<std::string>{}(path));
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, Durability durability)
    : path_(std::move(path)), tmp_(temporary_name(path_)), durability_(durability) {
  fd_ = io::create_new(tmp_).release();
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) abandon();
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) io::fs().close(fd_);
  fd_ = -1;
  io::fs().unlink(tmp_.c_str());
}

void AtomicFileWriter::append(const void* data, size_t size) {
  if (fd_ < 0) throw IoError(tmp_ + ": append after commit or failure");
  try {
    io::write_all(fd_, data, size, tmp_);
  } catch (...) {
    abandon();
    throw;
  }
}

void AtomicFileWriter::rewrite(uint64_t offset, const void* data, size_t size) {
  if (fd_ < 0) throw IoError(tmp_ + ": rewrite after commit or failure");
  try {
    const off_t end = ::lseek(fd_, 0, SEEK_CUR);
    if (end < 0) io::throw_errno(tmp_, "lseek failed", errno);
    if (offset + size > static_cast<uint64_t>(end)) {
      throw IoError(tmp_ + ": rewrite of bytes [" + std::to_string(offset) + ", " +
                    std::to_string(offset + size) + ") beyond the " + std::to_string(end) +
                    " written");
    }
    io::seek_to(fd_, static_cast<off_t>(offset), tmp_);
    io::write_all(fd_, data, size, tmp_);
    io::seek_to(fd_, end, tmp_);
  } catch (...) {
    abandon();
    throw;
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw IoError(tmp_ + ": commit after commit or failure");
  try {
    if (durability_ == Durability::kDurable) io::fsync_fd(fd_, tmp_);
    io::Fd(std::exchange(fd_, -1)).close_checked(tmp_);
    io::rename_path(tmp_, path_);
  } catch (...) {
    abandon();
    throw;
  }
  if (durability_ == Durability::kDurable) io::fsync_directory(io::parent_dir(path_));
}

void write_file_atomic(const std::string& path, const void* data, size_t size,
                       Durability durability) {
  AtomicFileWriter out(path, durability);
  out.append(data, size);
  out.commit();
}

}  // namespace rm

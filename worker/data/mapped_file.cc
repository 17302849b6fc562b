#include "worker/data/mapped_file.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <utility>

#include "io/posix_io.h"
#include "worker/data/data_error.h"

namespace rm {

MappedFile MappedFile::open(const std::string& path) {
  // io/ opens without waiting for a FIFO's writer and refuses anything but a regular file
  // before it is mapped; its messages already start with the path.
  io::Fd fd;
  MappedFile file;
  try {
    fd = io::open_read(path);
    file.size_ = io::regular_file_size(fd.get(), path);
  } catch (const IoError& e) {
    throw DataError(e.what());
  }
  file.path_ = path;
  if (file.size_ > 0) {  // mmap of length 0 is an error, and there is nothing to map
    void* addr = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (addr == MAP_FAILED) throw DataError(path, std::string("mmap failed: ") + strerror(errno));
    file.data_ = static_cast<const uint8_t*>(addr);
  }
  return file;  // the mapping keeps the file alive; fd closes here
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

void MappedFile::reset() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace rm

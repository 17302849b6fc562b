#include "configs/job_file.h"

#include <cerrno>
#include <cstring>

#include "configs/yaml_guard.h"
#include "io/posix_io.h"

namespace rm {

std::string read_job_file(const std::string& path, std::string* text, const std::string& kind) {
  // io/ refuses what is no regular file from fstat (a FIFO opens without waiting for a writer)
  // and a file over the limit before reading it; errors are turned into the loader's wording
  // (it adds the path).
  try {
    io::Fd fd = io::open_read(path);
    const uint64_t size = io::regular_file_size(fd.get(), path);
    if (size > kMaxJobBytes) return job_too_large(size, kind);
    text->assign(size, '\0');
    io::pread_exact(fd.get(), text->data(), size, 0, path);
  } catch (const IoError& e) {
    std::string why = e.what();
    if (why.compare(0, path.size() + 2, path + ": ") == 0) why.erase(0, path.size() + 2);
    if (e.error_code() != 0) why = std::strerror(e.error_code());  // "No such file or directory"
    return "cannot read " + kind + ": " + why;
  }
  return "";
}

}  // namespace rm

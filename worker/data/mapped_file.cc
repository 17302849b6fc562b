#include "worker/data/mapped_file.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "base/exit_codes.h"
#include "io/posix_io.h"
#include "worker/data/data_error.h"

namespace rm {

namespace {

// The mappings a SIGBUS may come from, for its handler: a fixed table (nothing is allocated in
// the handler), each slot's message written when it is claimed. More mappings than slots are
// mapped all the same, their SIGBUS unexplained.
struct Mapping {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uint64_t> size{0};
  char path[4096] = {};   // for stat(), which the handler may call
  char shrunk[512] = {};  // the messages: the file is shorter now, or not (an I/O error)
  size_t shrunk_length = 0;
  char failed[512] = {};
  size_t failed_length = 0;
};
constexpr size_t kMappings = 1024;
Mapping g_mappings[kMappings];
std::mutex g_claim;
struct sigaction g_previous;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Mapping& m : g_mappings) {
    const uintptr_t begin = m.begin.load(std::memory_order_acquire);
    const uint64_t size = m.size.load(std::memory_order_acquire);
    if (begin != 0 && at >= begin && at - begin < size) {
      // Shorter than mapped (or gone): the data changed under the run, bad input. Else the read
      // itself failed (a disk's EIO, an NFS timeout): a failure, which a restart may get past.
      struct stat st;
      const bool shrunk = ::stat(m.path, &st) != 0 || static_cast<uint64_t>(st.st_size) < size;
      ssize_t ignored = shrunk ? ::write(STDERR_FILENO, m.shrunk, m.shrunk_length)
                               : ::write(STDERR_FILENO, m.failed, m.failed_length);
      (void)ignored;
      ::_exit(shrunk ? kExitBadInput : kExitFailure);
    }
  }
  // Not ours: what was there before (Open MPI's handler prints a backtrace), else the default.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    return g_previous.sa_sigaction(sig, info, context);
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    return g_previous.sa_handler(sig);
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

void watch(const uint8_t* data, uint64_t size, const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
  const std::lock_guard<std::mutex> lock(g_claim);
  for (Mapping& m : g_mappings) {
    if (m.begin.load(std::memory_order_relaxed) != 0) continue;
    const std::string shown = path.substr(0, 300);
    const std::string shrunk = "ringmaster: " + shown +
                               ": the data file shrank or was replaced while the run read it (a "
                               "page past its new end: SIGBUS); put it back as it was\n";
    const std::string failed = "ringmaster: " + shown +
                               ": reading the data file failed (SIGBUS on its mapping: an I/O "
                               "error of its disk or file system)\n";
    m.shrunk_length = std::min(shrunk.size(), sizeof m.shrunk);
    std::memcpy(m.shrunk, shrunk.data(), m.shrunk_length);
    m.failed_length = std::min(failed.size(), sizeof m.failed);
    std::memcpy(m.failed, failed.data(), m.failed_length);
    std::snprintf(m.path, sizeof m.path, "%s", path.c_str());
    m.size.store(size, std::memory_order_release);
    m.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return;
  }
}

void unwatch(const uint8_t* data) {
  const std::lock_guard<std::mutex> lock(g_claim);
  for (Mapping& m : g_mappings) {
    if (m.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(data)) {
      m.begin.store(0, std::memory_order_release);
      return;
    }
  }
}

}  // namespace

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
    watch(file.data_, file.size_, path);
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
  if (data_ != nullptr) {
    unwatch(data_);
    munmap(const_cast<uint8_t*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace rm

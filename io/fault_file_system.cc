#include "io/fault_file_system.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

#include "io/journal_format.h"
#include "io/posix_io.h"

namespace rm {
namespace io {
namespace {

std::string absolute(const char* path) {
  if (path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return join(cwd, path);
}

// The inode of the directory holding `abs` (0 if it cannot be stat'ed).
uint64_t parent_ino(const std::string& abs) {
  struct stat st;
  return ::lstat(parent_dir(abs).c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

uint64_t fd_ino(int fd, uint64_t* size = nullptr) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return 0;
  if (size != nullptr) *size = static_cast<uint64_t>(st.st_size);
  return static_cast<uint64_t>(st.st_ino);
}

bool under(const std::string& abs, const std::string& dir) {
  if (dir.empty()) return false;
  if (abs.compare(0, dir.size(), dir) != 0) return false;
  return abs.size() == dir.size() || abs[dir.size()] == '/' || dir.back() == '/';
}

int errno_by_name(const std::string& name) {
  if (name == "EIO") return EIO;
  if (name == "ENOSPC") return ENOSPC;
  if (name == "EDQUOT") return EDQUOT;
  if (name == "EROFS") return EROFS;
  if (name == "EACCES") return EACCES;
  throw IoError("RM_TEST_IO_FAULT: error=" + name +
                " is not one of EIO, ENOSPC, EDQUOT, EROFS, EACCES");
}

std::string rank_of_process() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(name)) return v;
  }
  return "0";
}

bool is_restart() {
  for (const char* name : {"RM_RESTART_COUNT", "SLURM_RESTART_COUNT"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0') return true;
  }
  return false;
}

}  // namespace

FaultPlan parse_fault_plan(const std::string& text) {
  FaultPlan plan;
  std::string rank;
  std::istringstream in(text);
  std::string field;
  while (in >> field) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) throw IoError("RM_TEST_IO_FAULT: '" + field + "' is not key=value");
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "scope") {
      plan.scope = value;
    } else if (key == "journal") {
      plan.journal = value;
    } else if (key == "count_under") {
      plan.count_under = value;
    } else if (key == "start_at") {
      plan.start_at = value;
    } else if (key == "at") {
      plan.at = std::strtoll(value.c_str(), nullptr, 10);
    } else if (key == "action") {
      if (value != "crash" && value != "tear" && value != "fail") {
        throw IoError("RM_TEST_IO_FAULT: action=" + value + " is not crash, tear or fail");
      }
      plan.action = value;
    } else if (key == "op") {
      plan.op = value;
    } else if (key == "error") {
      plan.error = errno_by_name(value);
    } else if (key == "skip_fsync") {
      plan.skip_fsync = std::strtoll(value.c_str(), nullptr, 10);
    } else if (key == "sticky") {
      plan.sticky = value == "1";
    } else if (key == "rank") {
      rank = value;
    } else {
      throw IoError("RM_TEST_IO_FAULT: unknown key '" + key + "'");
    }
  }
  if (plan.scope.empty() || plan.journal.empty() || plan.scope[0] != '/' ||
      plan.journal[0] != '/') {
    throw IoError("RM_TEST_IO_FAULT: scope= and journal= must be given, as absolute paths");
  }
  if (plan.at < 0) throw IoError("RM_TEST_IO_FAULT: at= must be 0 or more");
  if (!rank.empty() && rank != rank_of_process()) plan.at = 0;  // this rank only journals
  if (rank.empty() && rank_of_process() != "0") plan.at = 0;
  return plan;
}

FaultFileSystem::FaultFileSystem(FaultPlan plan)
    : plan_(std::move(plan)), counting_(plan_.start_at.empty()) {
  // The ranks of a job (and its supervisor) share one journal: record ids carry the pid, so
  // that an "O id" never completes another process's change.
  ids_.store(static_cast<int64_t>(::getpid()) << 32);
  if (plan_.count_under.empty()) plan_.count_under = plan_.scope;
  journal_fd_ = ::open(plan_.journal.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (journal_fd_ < 0) throw_errno(plan_.journal, "cannot open the fault journal", errno);
  const std::string stash_dir = stash_dir_of(plan_.journal);
  if (::mkdir(stash_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw_errno(stash_dir, "cannot create the fault stash", errno);
  }
}

FaultFileSystem::~FaultFileSystem() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

bool FaultFileSystem::in_scope(const std::string& abs) const {
  return under(abs, plan_.scope);
}

void FaultFileSystem::record(const std::string& line) {
  const std::string text = line + "\n";
  // One write(2) per record: O_APPEND keeps concurrent records (threads, ranks) whole.
  if (::write(journal_fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::fprintf(stderr, "ringmaster: fault journal %s: write failed: %s\n",
                 plan_.journal.c_str(), std::strerror(errno));
    std::abort();  // a journal with a hole would make the power cut lie
  }
}

std::string FaultFileSystem::stash(const std::string& abs) {
  struct stat st;
  if (::lstat(abs.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return "-";
  const std::string target = join(stash_dir_of(plan_.journal),
                                  std::to_string(::getpid()) + "." + std::to_string(++stashed_));
  if (::link(abs.c_str(), target.c_str()) != 0) {
    std::fprintf(stderr, "ringmaster: fault stash: cannot link %s to %s: %s\n", abs.c_str(),
                 target.c_str(), std::strerror(errno));
    std::abort();
  }
  return target;
}

FaultFileSystem::Verdict FaultFileSystem::count(const char* kind, const std::string& abs,
                                                int64_t* number) {
  if (number != nullptr) *number = 0;
  if (dead_.load()) return Verdict::kFail;
  if (!plan_.count_calls) return Verdict::kProceed;
  if (!under(abs, plan_.count_under)) return Verdict::kProceed;
  if (!counting_.load()) {
    if (abs.find(plan_.start_at) == std::string::npos) return Verdict::kProceed;
    counting_.store(true);
  }
  if (plan_.op != "any" && plan_.op != kind) return Verdict::kProceed;
  const int64_t n = ++counted_;
  if (number != nullptr) *number = n;
  record(journal_line({"K", std::to_string(n), kind, abs, rank_of_process()}));
  if (plan_.at == 0) return Verdict::kProceed;
  const bool hit = n == plan_.at;
  if (plan_.action == "fail") {
    if (hit || (plan_.sticky && n > plan_.at)) {
      triggered_.store(true);
      return Verdict::kFail;
    }
    return Verdict::kProceed;
  }
  if (!hit) return Verdict::kProceed;
  triggered_.store(true);
  if (plan_.action == "tear" && std::strcmp(kind, "write") == 0) return Verdict::kTear;
  return Verdict::kCrash;
}

bool FaultFileSystem::fail_now(Verdict v) {
  if (v == Verdict::kProceed) return false;
  if (v == Verdict::kCrash) {
    if (!plan_.freeze) {
      std::fprintf(stderr, "ringmaster: RM_TEST_IO_FAULT: power cut at counted call %lld\n",
                   static_cast<long long>(counted_.load()));
      ::raise(SIGKILL);
    }
    dead_.store(true);
    errno = EIO;
    return true;
  }
  errno = dead_.load() ? EIO : plan_.error;
  return true;
}

int FaultFileSystem::open(const char* path, int flags, mode_t mode) {
  const std::string abs = absolute(path);
  const bool writing = (flags & (O_WRONLY | O_RDWR)) != 0;
  const bool directory = (flags & O_DIRECTORY) != 0;
  // Directories are tracked wherever they are: the fsync of the scope's own parent is what
  // makes the scope's entry durable.
  if (!directory && (!writing || !in_scope(abs))) return ::open(path, flags, mode);
  if (writing) {
    if (fail_now(count("create", abs))) return -1;
  }
  struct stat st;
  const bool created = writing && (flags & O_CREAT) != 0 && ::lstat(abs.c_str(), &st) != 0;
  int64_t id = 0;
  if (created) {
    id = next_id();
    record(journal_line({"E", std::to_string(id), std::to_string(parent_ino(abs)), "create",
                         "0", abs}));
  }
  const int fd = ::open(path, flags, mode);
  const int err = errno;
  if (created) record(journal_line({fd >= 0 ? "O" : "F", std::to_string(id)}));
  if (fd < 0) {
    errno = err;
    return -1;
  }
  if (writing) {
    uint64_t size = 0;
    const uint64_t ino = fd_ino(fd, &size);
    if (created || (flags & O_TRUNC) != 0) {
      record(journal_line({"T", std::to_string(ino), abs}));
    } else {
      record(journal_line({"A", std::to_string(ino), std::to_string(size)}));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  files_[fd] = OpenFile{abs, in_scope(abs), directory};
  return fd;
}

ssize_t FaultFileSystem::write(int fd, const void* data, size_t size) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = files_.find(fd);
    if (it == files_.end()) return ::write(fd, data, size);
    path = it->second.path;
  }
  const Verdict v = count("write", path);
  if (v == Verdict::kTear) {
    const ssize_t n = ::write(fd, data, size / 2);
    (void)n;
    std::fprintf(stderr, "ringmaster: RM_TEST_IO_FAULT: torn write of %zu bytes at counted call "
                 "%lld\n", size, static_cast<long long>(counted_.load()));
    if (!plan_.freeze) ::raise(SIGKILL);
    dead_.store(true);
    errno = EIO;
    return -1;
  }
  if (fail_now(v)) return -1;
  return ::write(fd, data, size);
}

int FaultFileSystem::fsync(int fd) {
  OpenFile file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = files_.find(fd);
    if (it == files_.end()) return ::fsync(fd);
    file = it->second;
  }
  int64_t n = 0;
  if (fail_now(count("fsync", file.path, &n))) return -1;
  if (n > 0 && ++fsyncs_ == plan_.skip_fsync) {
    record(journal_line({"P", "skipped fsync " + std::to_string(plan_.skip_fsync), rank_of_process()}));
    return 0;
  }
  uint64_t size = 0;
  const uint64_t ino = fd_ino(fd, &size);
  if (file.directory) {
    const int64_t id = next_id();
    record(journal_line({"Y", std::to_string(id), std::to_string(ino)}));
    const int rc = ::fsync(fd);
    if (rc == 0) record(journal_line({"Z", std::to_string(id)}));
    return rc;
  }
  const int rc = ::fsync(fd);
  if (rc == 0) record(journal_line({"S", std::to_string(ino), std::to_string(size)}));
  return rc;
}

int FaultFileSystem::close(int fd) {
  std::string path;
  bool tracked_write = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = files_.find(fd);
    if (it != files_.end()) {
      path = it->second.path;
      tracked_write = !it->second.directory;
      files_.erase(it);
    }
  }
  if (tracked_write && fail_now(count("close", path))) {
    ::close(fd);  // the descriptor is released even when close fails (Linux)
    return -1;
  }
  return ::close(fd);
}

int FaultFileSystem::rename(const char* from, const char* to) {
  const std::string a = absolute(from), b = absolute(to);
  if (!in_scope(a) && !in_scope(b)) return ::rename(from, to);
  if (fail_now(count("rename", b))) return -1;
  const int64_t id = next_id();
  record(journal_line({"E", std::to_string(id), std::to_string(parent_ino(a)), "rename",
                       std::to_string(parent_ino(b)), stash(b), a, b}));
  const int rc = ::rename(from, to);
  const int err = errno;
  record(journal_line({rc == 0 ? "O" : "F", std::to_string(id)}));
  errno = err;
  return rc;
}

int FaultFileSystem::exchange(const char* a, const char* b) {
  const std::string x = absolute(a), y = absolute(b);
  if (!in_scope(x) && !in_scope(y)) return PosixFileSystem().exchange(a, b);
  if (fail_now(count("exchange", y))) return -1;
  const int64_t id = next_id();
  record(journal_line({"E", std::to_string(id), std::to_string(parent_ino(x)), "exchange",
                       std::to_string(parent_ino(y)), x, y}));
  const int rc = PosixFileSystem().exchange(a, b);
  const int err = errno;
  record(journal_line({rc == 0 ? "O" : "F", std::to_string(id)}));
  errno = err;
  return rc;
}

int FaultFileSystem::unlink(const char* path) {
  const std::string abs = absolute(path);
  if (!in_scope(abs)) return ::unlink(path);
  if (fail_now(count("unlink", abs))) return -1;
  struct stat st;
  if (::lstat(abs.c_str(), &st) != 0) return ::unlink(path);  // nothing to undo
  const int64_t id = next_id();
  record(journal_line({"E", std::to_string(id), std::to_string(parent_ino(abs)), "unlink",
                       stash(abs), abs}));
  const int rc = ::unlink(path);
  const int err = errno;
  record(journal_line({rc == 0 ? "O" : "F", std::to_string(id)}));
  errno = err;
  return rc;
}

int FaultFileSystem::mkdir(const char* path, mode_t mode) {
  const std::string abs = absolute(path);
  if (!in_scope(abs)) return ::mkdir(path, mode);
  if (fail_now(count("mkdir", abs))) return -1;
  struct stat st;
  if (::lstat(abs.c_str(), &st) == 0) return ::mkdir(path, mode);  // EEXIST, nothing new
  const int64_t id = next_id();
  record(journal_line({"E", std::to_string(id), std::to_string(parent_ino(abs)), "create", "1",
                       abs}));
  const int rc = ::mkdir(path, mode);
  const int err = errno;
  record(journal_line({rc == 0 ? "O" : "F", std::to_string(id)}));
  errno = err;
  return rc;
}

int FaultFileSystem::rmdir(const char* path) {
  const std::string abs = absolute(path);
  if (!in_scope(abs)) return ::rmdir(path);
  if (fail_now(count("rmdir", abs))) return -1;
  const int64_t id = next_id();
  struct stat st;
  const uint64_t own = ::lstat(abs.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  record(journal_line({"E", std::to_string(id), std::to_string(parent_ino(abs)), "rmdir", abs,
                       std::to_string(own)}));
  const int rc = ::rmdir(path);
  const int err = errno;
  record(journal_line({rc == 0 ? "O" : "F", std::to_string(id)}));
  errno = err;
  return rc;
}

void FaultFileSystem::note(const char* text) {
  record(journal_line({"P", text, rank_of_process()}));
}

void install_fault_file_system(const char* text) {
  if (text == nullptr || text[0] == '\0') return;
  FaultPlan plan = parse_fault_plan(text);
  if (is_restart()) plan.at = 0;  // faults strike the first attempt only; still journal
  plan.count_calls = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
                     std::getenv("PMIX_RANK") != nullptr ||
                     std::getenv("RM_RESTART_COUNT") != nullptr;  // a rank, not a supervisor
  // Lives until the process ends: writers may run on any thread until exit.
  static std::unique_ptr<FaultFileSystem> installed;
  static std::unique_ptr<ScopedFileSystem> scope;
  installed = std::make_unique<FaultFileSystem>(plan);
  scope = std::make_unique<ScopedFileSystem>(installed.get());
  std::fprintf(stderr, "ringmaster: RM_TEST_IO_FAULT: journaling %s%s\n", plan.scope.c_str(),
               plan.at > 0 ? (" (" + plan.action + " at counted call " + std::to_string(plan.at) +
                              ")").c_str()
                           : "");
}

}  // namespace io
}  // namespace rm

#include "base/rank_end.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/run_lock.h"

namespace rm {

std::string rank_end_token() {
  const char* lock = std::getenv(kRunLockEnv);  // "<pid> <host> <canonical run dir>"
  const char* restart = std::getenv("RM_RESTART_COUNT");
  if (lock == nullptr || *lock == '\0') return "";
  std::string holder(lock);
  const size_t host_end = holder.find(' ', holder.find(' ') + 1);
  if (host_end != std::string::npos) holder.resize(host_end);
  return holder + " attempt " + (restart != nullptr ? restart : "0") + "\n";
}

std::string rank_end_marker_path(const std::string& run_dir, int rank) {
  return run_dir + "/logs/rank-" + std::to_string(rank) + ".ended";
}

int first_rank_ended(const std::string& run_dir, const std::string& token) {
  if (token.empty()) return -1;
  const std::string dir = run_dir + "/logs";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  int first = -1;
  while (const dirent* e = ::readdir(d)) {
    // "rank-K.ended" exactly, K decimal digits.
    const std::string name = e->d_name;
    const std::string prefix = "rank-", suffix = ".ended";
    if (name.size() <= prefix.size() + suffix.size() ||
        name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const int rank = std::atoi(digits.c_str());
    if (first >= 0 && rank >= first) continue;
    const int fd = ::open((dir + "/" + e->d_name).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    char text[512];
    const ssize_t n = ::read(fd, text, sizeof text);
    ::close(fd);
    if (n == static_cast<ssize_t>(token.size()) && std::memcmp(text, token.data(), n) == 0) {
      first = rank;
    }
  }
  ::closedir(d);
  return first;
}

}  // namespace rm

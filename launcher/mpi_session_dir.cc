#include "launcher/mpi_session_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace rm {
namespace {

constexpr const char* kParentPrefix = "rm-mpi.";
constexpr const char* kMarkerSuffix = ".launcher";

// Where pids mean what they say here: the host, this boot of it, and this pid namespace (two
// containers may share /tmp and a host name, each with pids of its own).
std::string pid_space() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  char ns[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return std::string(host) + " " + boot + " " +
         (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "");
}

// Whether no process `pid` exists on this host.
bool gone(long pid) {
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Whether every mpirun whose session directory lies in `base` (ompi.*/pid.N) is gone here.
bool mpiruns_gone(const std::string& base) {
  std::error_code error;
  for (const auto& ompi : std::filesystem::directory_iterator(base, error)) {
    std::error_code inner;
    for (const auto& session : std::filesystem::directory_iterator(ompi.path(), inner)) {
      const std::string name = session.path().filename().string();
      if (name.rfind("pid.", 0) != 0) continue;
      if (!gone(std::strtol(name.c_str() + 4, nullptr, 10))) return false;
    }
  }
  return true;
}

}  // namespace

std::string mpi_session_parent() {
  // Open MPI's own default base is the same temporary directory (TMPDIR, else /tmp).
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  return dir + "/" + kParentPrefix + std::to_string(::geteuid());
}

std::string new_mpi_session_base() {
  if (std::getenv("OMPI_MCA_orte_tmpdir_base") != nullptr) return "";
  static std::atomic<int> count{0};
  const std::string parent = mpi_session_parent();
  const std::string base =
      parent + "/" + std::to_string(::getpid()) + "." + std::to_string(++count);
  // The marker beside it says where its launcher's pid means something (host, boot, pid
  // namespace: sweep_killed_launch_bases). Best effort: without it, a base a killed launch
  // leaves is only left behind.
  ::mkdir(parent.c_str(), 0700);
  std::ofstream(base + kMarkerSuffix) << pid_space() << "\n";
  return base;
}

void remove_mpi_session_base(const std::string& base) {
  if (base.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(base, ignored);
  std::filesystem::remove(base + kMarkerSuffix, ignored);
}

int sweep_killed_launch_bases(const std::string& parent, double min_age_s) {
  std::error_code error;
  std::filesystem::directory_iterator it(parent, error);
  if (error) return 0;
  const std::string here = pid_space();
  const std::time_t now = std::time(nullptr);
  int removed = 0;
  for (const auto& entry : it) {
    const std::string marker = entry.path().string();
    const std::string name = entry.path().filename().string();
    const std::string_view suffix = kMarkerSuffix;
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix.data()) != 0) {
      continue;
    }
    struct stat st {};
    if (::lstat(marker.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        std::difftime(now, st.st_mtime) < min_age_s) {
      continue;
    }
    std::string written;
    std::getline(std::ifstream(marker), written);
    const std::string base = marker.substr(0, marker.size() - suffix.size());
    // Made here, by a launcher that is gone, for mpiruns that are gone: nothing uses it.
    if (written != here || !gone(std::strtol(name.c_str(), nullptr, 10)) || !mpiruns_gone(base)) {
      continue;
    }
    remove_mpi_session_base(base);
    ++removed;
  }
  return removed;
}

int sweep_mpi_session_bases(const std::string& parent, double min_age_s) {
  std::error_code error;
  std::filesystem::directory_iterator it(parent, error);
  if (error) return 0;
  const std::time_t now = std::time(nullptr);
  int removed = 0;
  for (const auto& entry : it) {
    struct stat st {};
    const std::string path = entry.path().string();
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (std::difftime(now, st.st_mtime) < min_age_s) continue;
    // rmdir, never a recursive removal: it fails on a directory that is not empty, the
    // check and the removal in one step, so a live launch's base is never touched.
    if (::rmdir(path.c_str()) == 0) ++removed;
  }
  return removed;
}

void sweep_mpi_session_bases_from_rank() {
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char* base = std::getenv("OMPI_MCA_orte_tmpdir_base");
  if (local_rank == nullptr || std::string(local_rank) != "0" || base == nullptr) return;
  const std::filesystem::path parent = std::filesystem::path(base).parent_path();
  if (parent.filename().string().rfind(kParentPrefix, 0) != 0) return;  // the user's own base
  sweep_mpi_session_bases(parent.string(), kEndedSessionBaseAgeS);
}

}  // namespace rm

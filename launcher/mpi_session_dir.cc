#include "launcher/mpi_session_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <filesystem>

namespace rm {
namespace {

constexpr const char* kParentPrefix = "rm-mpi.";

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
  return mpi_session_parent() + "/" + std::to_string(::getpid()) + "." + std::to_string(++count);
}

void remove_mpi_session_base(const std::string& base) {
  if (base.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(base, ignored);
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

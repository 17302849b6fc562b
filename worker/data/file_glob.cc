#include "worker/data/file_glob.h"

#include <errno.h>
#include <glob.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "worker/data/data_error.h"

namespace rm {
namespace {

bool has_wildcard(const std::string& pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
}

// The directory a pattern's matches would be in: everything before the component holding its
// first wildcard ("data/fineweb10B" for "data/fineweb10B/fineweb_train_*.bin"; "." for
// "*.bin").
std::string search_dir(const std::string& pattern) {
  const size_t wild = pattern.find_first_of("*?[");
  const size_t slash = pattern.rfind('/', wild);
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : pattern.substr(0, slash);
}

// The first directory glob(3) could not read, and why (glob's error callback has no user
// pointer, hence a thread-local).
thread_local std::string t_glob_error_path;
thread_local int t_glob_errno = 0;

int note_glob_error(const char* path, int err) {
  if (t_glob_error_path.empty()) {
    t_glob_error_path = path;
    t_glob_errno = err;
  }
  return 1;  // stop (GLOB_ERR does too)
}

// Why `pattern` matched nothing, naming the directory looked in: it is missing, not a
// directory, unreadable, or holds no file of that name.
std::string no_match(const std::string& pattern) {
  const std::string dir = search_dir(pattern);
  std::string where = "'" + dir + "'";
  if (dir[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) != nullptr) where += " (under " + std::string(cwd) + ")";
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return "no files match '" + pattern + "': the directory " + where +
           (err == ENOENT ? " does not exist" : std::string(": ") + strerror(err));
  }
  if (!S_ISDIR(st.st_mode)) {
    return "no files match '" + pattern + "': " + where + " is not a directory";
  }
  if (!t_glob_error_path.empty()) {
    return "cannot expand '" + pattern + "': the directory '" + t_glob_error_path +
           "' cannot be read: " + strerror(t_glob_errno);
  }
  return "no files match '" + pattern + "' in the directory " + where;
}

// glob_t owner, so every exit path frees it.
struct GlobResult {
  glob_t g{};
  ~GlobResult() { globfree(&g); }
};

}  // namespace

std::vector<std::string> expand_globs(const std::vector<std::string>& patterns) {
  if (patterns.empty()) throw DataError("no data files given");
  std::vector<std::string> paths;
  for (const std::string& pattern : patterns) {
    if (!has_wildcard(pattern)) {
      // A plain path: report why it cannot be used ("No such file or directory") rather
      // than a glob's "no files match".
      struct stat st;
      if (stat(pattern.c_str(), &st) != 0) throw DataError(pattern, strerror(errno));
      paths.push_back(pattern);
      continue;
    }
    GlobResult result;
    t_glob_error_path.clear();
    const int rc = glob(pattern.c_str(), GLOB_ERR, note_glob_error, &result.g);
    if (rc == GLOB_NOMATCH || rc == GLOB_ABORTED) throw DataError(no_match(pattern));
    if (rc != 0) throw DataError("cannot expand '" + pattern + "': out of memory");
    std::vector<std::string> matches(result.g.gl_pathv, result.g.gl_pathv + result.g.gl_pathc);
    std::sort(matches.begin(), matches.end());
    paths.insert(paths.end(), matches.begin(), matches.end());
  }
  return paths;
}

}  // namespace rm

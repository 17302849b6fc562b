#include "worker/data/file_glob.h"

#include <errno.h>
#include <glob.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>

#include "worker/data/data_error.h"

namespace rm {
namespace {

bool has_wildcard(const std::string& pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
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
    const int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &result.g);
    if (rc == GLOB_NOMATCH) throw DataError("no files match '" + pattern + "'");
    if (rc != 0) {
      throw DataError("cannot expand '" + pattern + "': " +
                      (rc == GLOB_ABORTED ? "a directory could not be read" : "out of memory"));
    }
    std::vector<std::string> matches(result.g.gl_pathv, result.g.gl_pathv + result.g.gl_pathc);
    std::sort(matches.begin(), matches.end());
    paths.insert(paths.end(), matches.begin(), matches.end());
  }
  return paths;
}

}  // namespace rm

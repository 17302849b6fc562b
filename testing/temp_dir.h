// The one scratch-directory helper of the tests and the fuzz harness: a fresh directory, made
// with mkdtemp under `base` ($TMPDIR, else /tmp, when empty), removed with everything in it when
// the object goes (errors ignored: a test's cleanup must not fail the test). Header-only, so any
// test or harness target can use it without linking anything.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace rm::testutil {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "rm_test", const std::string& base = "") {
    std::string root = base;
    if (root.empty()) {
      const char* t = ::getenv("TMPDIR");
      root = t != nullptr && *t != '\0' ? t : "/tmp";
    }
    std::string tmpl = root + "/" + prefix + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("cannot make a scratch directory " + tmpl + ": " +
                               std::strerror(errno));
    }
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory (nothing is created).
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // Writes raw bytes to file(name) (for deliberately broken files) and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = file(name);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();  // a full disk may show only at the flush
    if (!out) throw std::runtime_error("cannot write " + p);
    return p;
  }

 private:
  std::string path_;
};

}  // namespace rm::testutil

namespace rm {
// Every test of the project names it TempDir.
using testutil::TempDir;
}  // namespace rm

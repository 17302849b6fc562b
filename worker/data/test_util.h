// Test-only helpers: TempDir (a fresh directory removed at scope exit), hand-made shard bytes
// for broken files, and data_error_of (the message of an expected DataError).
#pragma once

#include <gtest/gtest.h>

#include <stdint.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/data/data_error.h"

namespace rm {

class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string templ =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/rm_data_test_XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // Writes raw bytes (for deliberately broken files) and returns the path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = file(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + p);
    return p;
  }

 private:
  std::string path_;
};

// The bytes of an llm.c shard with an arbitrary header and tokens (for broken files).
inline std::string shard_bytes(int32_t magic, int32_t version, int32_t count,
                               const std::vector<uint16_t>& tokens) {
  std::string bytes(1024, '\0');
  const int32_t words[3] = {magic, version, count};
  bytes.replace(0, sizeof words, reinterpret_cast<const char*>(words), sizeof words);
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(uint16_t));
  return bytes;
}

// Runs f, expects a DataError, and returns its message.
template <typename F>
std::string data_error_of(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

}  // namespace rm

// Test-only helpers: TempDir (testing/temp_dir.h), hand-made shard bytes
// for broken files, data_error_of (the message of an expected DataError), and write_tokenizer
// (a small GPT-2-style tokenizer's files, tokenizer_files_test_util.h, in a TempDir).
#pragma once

#include <gtest/gtest.h>

#include <stdint.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "testing/temp_dir.h"
#include "worker/data/data_error.h"
#include "worker/data/tokenizer_files_test_util.h"

namespace rm {

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

// Writes them as DIR/SUB/vocab.json and merges.txt (Hugging Face's names); returns DIR/SUB.
inline std::string write_tokenizer(const TempDir& dir, const std::string& sub,
                                   const std::vector<std::pair<std::string, std::string>>& merges) {
  const TokenizerFiles f = tokenizer_files(merges);
  std::filesystem::create_directories(dir.file(sub));
  dir.write(sub + "/vocab.json", f.vocab_json);
  dir.write(sub + "/merges.txt", f.merges);
  return dir.file(sub);
}

}  // namespace rm

// Test-only helpers: TempDir (testing/temp_dir.h), hand-made shard bytes
// for broken files, data_error_of (the message of an expected DataError), and small GPT-2-style
// tokenizers (bpe_tokenizer.h) with merges of one's choosing.
#pragma once

#include <gtest/gtest.h>

#include <stdint.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "testing/temp_dir.h"
#include "worker/data/data_error.h"

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

// Bytes written in GPT-2's byte alphabet, independently of bpe_tokenizer.cc: the printable
// bytes stand for themselves, the others for U+0100 onwards, in byte order.
inline std::string in_gpt2_alphabet(const std::string& bytes) {
  const auto printable = [](uint32_t x) {
    return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
  };
  std::string out;
  for (unsigned char b : bytes) {
    uint32_t cp = b;
    if (!printable(b)) {
      cp = 256;
      for (uint32_t x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

// A tokenizer's two files: a byte-level vocabulary (ids 0-255 the bytes in order) plus
// `merges`, each a pair of tokens' bytes; the merged tokens get ids 256 onwards, in merge order.
struct TokenizerFiles {
  std::string vocab_json;
  std::string merges = "#version: 0.2\n";
};

inline TokenizerFiles tokenizer_files(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[in_gpt2_alphabet(std::string(1, static_cast<char>(b)))] = b;
  TokenizerFiles f;
  int next = 256;
  for (const auto& [l, r] : merges) {
    f.merges += in_gpt2_alphabet(l) + " " + in_gpt2_alphabet(r) + "\n";
    if (!vocab.contains(in_gpt2_alphabet(l + r))) vocab[in_gpt2_alphabet(l + r)] = next++;
  }
  f.vocab_json = vocab.dump();
  return f;
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

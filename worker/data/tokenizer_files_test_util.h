// Small GPT-2-style tokenizers (bpe_tokenizer.h) with merges of one's choosing, as the two files'
// contents, for tests and the fuzz target (no GoogleTest here). Test-only.
#pragma once

#include <stdint.h>

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace rm {

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

}  // namespace rm

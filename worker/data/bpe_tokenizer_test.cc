#include "worker/data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/data/test_util.h"

namespace rm {
namespace {

BpeTokenizer tokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  const TokenizerFiles f = tokenizer_files(merges);
  return BpeTokenizer::from_strings(f.vocab_json, f.merges, "vocab.json", "merges.txt");
}

std::vector<std::string> token_strings(BpeTokenizer& t, const std::string& text) {
  std::vector<std::string> out;
  for (int32_t id : t.encode(text)) out.push_back(t.token_bytes(id));
  return out;
}

using Strings = std::vector<std::string>;

TEST(BpeTokenizer, BytesAloneWithoutMerges) {
  BpeTokenizer t = tokenizer({});
  EXPECT_EQ(t.vocab_size(), 256);
  EXPECT_EQ(t.encode("ab\n"), (std::vector<int32_t>{'a', 'b', '\n'}));
}

TEST(BpeTokenizer, LowestRankFirstThenLeftmost) {
  // Ranks: "b c" 0, "a b" 1, "a bc" 2. In "abc" the pair "b c" merges first although "a b" is
  // to its left; then "a bc".
  BpeTokenizer t = tokenizer({{"b", "c"}, {"a", "b"}, {"a", "bc"}});
  EXPECT_EQ(token_strings(t, "abc"), (Strings{"abc"}));
  EXPECT_EQ(token_strings(t, "abab"), (Strings{"ab", "ab"}));
  // "aaa" with "a a": the leftmost pair first, leaving the third a alone.
  BpeTokenizer u = tokenizer({{"a", "a"}});
  EXPECT_EQ(token_strings(u, "aaa"), (Strings{"aa", "a"}));
  EXPECT_EQ(token_strings(u, "aaaa"), (Strings{"aa", "aa"}));
}

TEST(BpeTokenizer, MergesStayInsideAPiece) {
  // " t" and "t h" would join across "a th" only if pieces did not bound the merges.
  BpeTokenizer t = tokenizer({{" ", "t"}, {" t", "h"}, {"a", " "}});
  EXPECT_EQ(token_strings(t, "a th"), (Strings{"a", " th"}));
  EXPECT_EQ(token_strings(t, "a th"), (Strings{"a", " th"}));  // again, from the cache
}

TEST(BpeTokenizer, LongPiecesMergeInLinearithmicTime) {
  // One piece of 200000 letters: a pair-by-pair rescan would take minutes.
  BpeTokenizer t = tokenizer({{"a", "b"}, {"ab", "ab"}, {"abab", "abab"}});
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "ab";
  const std::vector<int32_t> ids = t.encode(text);
  EXPECT_EQ(ids.size(), 25000u);
  EXPECT_EQ(t.decode(ids), text);
}

TEST(BpeTokenizer, AnyBytesRoundTrip) {
  BpeTokenizer t = tokenizer({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"\xc3", "\xa9"}});
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text)
      c = static_cast<char>(rng() % 8 == 0 ? rng() % 256 : " the\xc3\xa9x"[rng() % 8]);
    EXPECT_EQ(t.decode(t.encode(text)), text);
  }
}

TEST(BpeTokenizer, EndOfTextInsideTextIsOrdinaryText) {
  TokenizerFiles f = tokenizer_files({});
  nlohmann::json vocab = nlohmann::json::parse(f.vocab_json);
  vocab["<|endoftext|>"] = 256;
  BpeTokenizer t = BpeTokenizer::from_strings(vocab.dump(), f.merges, "v", "m");
  EXPECT_EQ(t.vocab_size(), 257);
  EXPECT_EQ(t.token_bytes(256), "<|endoftext|>");
  const std::vector<int32_t> ids = t.encode("<|endoftext|>");
  EXPECT_EQ(ids.size(), 13u);
  EXPECT_EQ(t.decode({256}), "<|endoftext|>");
}

TEST(BpeTokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
  BpeTokenizer t = tokenizer({});
  EXPECT_THROW(t.decode({256}), std::out_of_range);
  EXPECT_THROW(t.decode({-1}), std::out_of_range);
  EXPECT_EQ(t.token_bytes(999), "");
}

TEST(BpeTokenizer, BadFilesAreNamed) {
  const TokenizerFiles ok = tokenizer_files({{"a", "b"}});
  const auto error = [](const std::string& vocab, const std::string& merges) {
    return data_error_of([&] { BpeTokenizer::from_strings(vocab, merges, "V.json", "M.txt"); });
  };
  EXPECT_EQ(error("[1, 2]", ok.merges), "V.json: not a JSON object of tokens and their ids");
  EXPECT_EQ(error("{\"a\": 0}", ""),
            "V.json: no token for the byte 0 (a byte-level vocabulary has one for each of the "
            "256)");
  nlohmann::json v = nlohmann::json::parse(ok.vocab_json);
  v["xyz"] = 3;
  EXPECT_EQ(error(v.dump(), ok.merges), "V.json: id 3 is given to two tokens");
  // A key written twice (the parser would keep one value): the ids 97 and 999 both for "a".
  std::string twice = ok.vocab_json;
  twice.insert(twice.rfind('}'), ", \"a\": 999");
  EXPECT_EQ(error(twice, ok.merges), "V.json: token 'a' is written twice");
  v = nlohmann::json::parse(ok.vocab_json);
  v["x y"] = 999;  // a space is not in the alphabet (it is written "Ġ")
  EXPECT_EQ(error(v.dump(), ok.merges),
            "V.json: token 'x y' (id 999) is not written in GPT-2's byte alphabet");
  v = nlohmann::json::parse(ok.vocab_json);
  v["q"] = -4;
  EXPECT_EQ(error(v.dump(), ok.merges), "V.json: token 'q': id must be an integer in [0, 1048576)");
  EXPECT_EQ(error(ok.vocab_json, "#version: 0.2\na b\nab\n"),
            "M.txt:3: expected two tokens separated by one space, got 'ab'");
  EXPECT_EQ(error(ok.vocab_json, "a b\nb c\n"),
            "M.txt:2: merge 'b c': the merged token is not in V.json");
  EXPECT_EQ(error(ok.vocab_json, "a b\na b\n"), "M.txt:2: merge 'a b' is listed twice");
}

TEST(BpeTokenizer, LoadsEitherPairOfFileNames) {
  TempDir dir;
  const TokenizerFiles f = tokenizer_files({{"a", "b"}});
  std::filesystem::create_directories(dir.path() + "/openai");
  std::filesystem::create_directories(dir.path() + "/hf");
  dir.write("openai/encoder.json", f.vocab_json);
  dir.write("openai/vocab.bpe", f.merges);
  dir.write("hf/vocab.json", f.vocab_json);
  dir.write("hf/merges.txt", f.merges);
  for (const char* sub : {"/openai", "/hf"}) {
    BpeTokenizer t = BpeTokenizer::load(dir.path() + sub);
    EXPECT_EQ(t.encode("ab").size(), 1u) << sub;
    EXPECT_EQ(t.directory(), dir.path() + sub);
  }
  EXPECT_EQ(data_error_of([&] { BpeTokenizer::load(dir.path()); }),
            dir.path() +
                ": no GPT-2 tokenizer here: expected encoder.json and vocab.bpe "
                "(OpenAI's names) or vocab.json and merges.txt (Hugging Face's)");
  EXPECT_NE(data_error_of([&] {
              BpeTokenizer::load(dir.path() + "/hf/vocab.json");
            }).find("not a directory"),
            std::string::npos);
}

}  // namespace
}  // namespace rm

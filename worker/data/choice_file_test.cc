// worker/data/choice_file.h: llm.c's multiple-choice eval format, byte for byte as its
// write_evalfile lays it out, read back whole; every way a file can be wrong is refused with a
// message that names the file, the example and what is wrong.
#include "worker/data/choice_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "worker/data/test_util.h"

namespace rm {
namespace {

std::vector<ChoiceExample> two_examples() {
  ChoiceExample a;
  a.label = 1;
  a.context = {5, 6};
  a.completions = {{7}, {8, 9}};
  ChoiceExample b;
  b.label = 3;
  b.context = {65534, 0, 1};
  b.completions = {{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11}};
  return {a, b};
}

// The uint16 words after the header.
std::vector<uint16_t> words_of(const std::string& bytes) {
  std::vector<uint16_t> w((bytes.size() - 1024) / 2);
  std::memcpy(w.data(), bytes.data() + 1024, 2 * w.size());
  return w;
}

std::string with_words(const std::string& bytes, const std::vector<uint16_t>& words) {
  return bytes.substr(0, 1024) +
         std::string(reinterpret_cast<const char*>(words.data()), 2 * words.size());
}

std::string with_header(std::string bytes, int field, int32_t value) {
  std::memcpy(&bytes[4 * field], &value, 4);
  return bytes;
}

TEST(ChoiceFile, IsLaidOutAsLlmcWritesIt) {
  const std::string bytes = encode_choice_file(two_examples());
  int32_t header[4];
  std::memcpy(header, bytes.data(), sizeof header);
  EXPECT_EQ(header[0], 20240522);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 2);
  const std::vector<uint16_t> w = words_of(bytes);
  // start, bytes, index, label, completions, context length + tokens, each completion's.
  const std::vector<uint16_t> first = {65535, 26, 0, 1, 2, 2, 5, 6, 1, 7, 2, 8, 9};
  ASSERT_GE(w.size(), first.size());
  EXPECT_EQ(std::vector<uint16_t>(w.begin(), w.begin() + 13), first);
  EXPECT_EQ(w[13], 65535);
  EXPECT_EQ(w[15], 1);                                // the second example's index
  EXPECT_EQ(header[3], static_cast<int32_t>(w[14]));  // the longest: the second, in bytes
  EXPECT_EQ(2 * w.size(), 26u + w[14]);
}

TEST(ChoiceFile, ReadsBackWhatWasWritten) {
  TempDir dir;
  const std::vector<ChoiceExample> in = two_examples();
  const std::vector<ChoiceExample> out =
      read_choice_file(dir.write("hs.bin", encode_choice_file(in)));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].label, in[i].label);
    EXPECT_EQ(out[i].context, in[i].context);
    EXPECT_EQ(out[i].completions, in[i].completions);
  }
}

TEST(ChoiceFile, EveryDamageIsRefusedByExampleAndWhat) {
  TempDir dir;
  const std::string good = encode_choice_file(two_examples());
  const std::vector<uint16_t> w = words_of(good);
  const auto changed = [&](size_t at, uint16_t value) {
    std::vector<uint16_t> v = w;
    v[at] = value;
    return with_words(good, v);
  };
  // The first example's words: 0 start, 1 bytes, 2 index, 3 label, 4 completions, 5 context
  // length, 6-7 context, 8 first completion's length, 9 its token, 10 the second's length.
  struct Case {
    std::string bytes, says;
  };
  const Case cases[] = {
      {good.substr(0, 1000), "1000 bytes, shorter than the 1024-byte header"},
      {with_header(good, 0, 20240520), "magic 20240520, not 20240522"},
      {with_header(good, 1, 2), "version 2, only version 1 is read"},
      {with_header(good, 2, 0), "the header says 0 examples, not 1 to 65535"},
      {with_header(good, 2, 3), "the header says 3 examples, the file ends after 2"},
      {with_header(good, 3, 26), "the header says the longest example is 26 bytes, it is "},
      {good + "x", "an odd number of bytes after the header"},
      {good + std::string(2, '\0'), "2 bytes after the last of the 2 examples"},
      {changed(0, 7), "example 0: starts with 7, not the marker 65535 (at byte 1024)"},
      {changed(1, 27), "example 0: says it is 27 bytes, not an even number of at least 12"},
      {changed(1, 9000), "example 0: says it is 9000 bytes, past the end of the file"},
      {changed(2, 1), "example 0: its index field is 1, not 0"},
      {changed(3, 2), "example 0: label 2 names no completion of its 2"},
      {changed(4, 1), "example 0: 1 completions: a choice needs at least 2"},
      {changed(5, 0), "example 0: its context is empty"},
      {changed(5, 40), "example 0: its context has 40 tokens, more than the 7 words left"},
      {changed(8, 0), "example 0: completion 0 is empty"},
      {changed(10, 1), "example 0: 2 bytes left over after its last completion"},
      {changed(4, 3), "example 0: ends inside its completion 2"},
      {changed(6, 65535), "example 0: a token of 65535, which is the examples' start marker"},
      {changed(13, 0), "example 1: starts with 0, not the marker 65535 (at byte 1050)"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.write("bad.bin", c.bytes);
    EXPECT_EQ(data_error_of([&] { read_choice_file(path); }).rfind(path + ": " + c.says, 0), 0u)
        << c.says << "\n"
        << data_error_of([&] { read_choice_file(path); });
  }
  EXPECT_NE(data_error_of([&] {
              read_choice_file(dir.write("shard.bin", with_header(good, 0, 20240520)));
            }).find("a token shard, for --data"),
            std::string::npos);
}

TEST(ChoiceFile, FitsAModelOnlyWithinItsVocabularyAndWindow) {
  std::vector<ChoiceExample> e = two_examples();
  e[1].context = {1, 2, 3};
  // The longest row: 3 context tokens + 4 completion tokens - 1 = a window of 6.
  EXPECT_NO_THROW(check_choices_fit("hs.bin", e, 12, 6));
  EXPECT_EQ(data_error_of([&] { check_choices_fit("hs.bin", e, 12, 5); }),
            "hs.bin: example 1: its context (3 tokens) and completion 3 (4) need a window of 6 "
            "tokens, the model's seq_len is 5");
  EXPECT_EQ(data_error_of([&] { check_choices_fit("hs.bin", e, 11, 6); }),
            "hs.bin: example 1: completion 4 holds token 11, >= the model's vocab_size 11");
  e[0].context = {5, 60};
  EXPECT_EQ(data_error_of([&] { check_choices_fit("hs.bin", e, 12, 6); }),
            "hs.bin: example 0: its context holds token 60, >= the model's vocab_size 12");
}

TEST(ChoiceFile, WhatTheFormatCannotHoldIsNotWritten) {
  std::vector<ChoiceExample> e = two_examples();
  e[0].completions[0] = {65535};
  EXPECT_THROW(encode_choice_file(e), std::invalid_argument);
  EXPECT_THROW(encode_choice_file({}), std::invalid_argument);
  e = two_examples();
  e[0].context.assign(40000, 1);  // 80,000 bytes: more than the size field holds
  EXPECT_THROW(encode_choice_file(e), std::invalid_argument);
}

}  // namespace
}  // namespace rm

#include "worker/data/token_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/data/data_error.h"
#include "worker/data/file_glob.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

std::vector<int32_t> all_tokens(const TokenSource& source, size_t segment) {
  std::vector<int32_t> out(source.segment_size(segment));
  source.copy(segment, 0, out.size(), out.data());
  return out;
}

std::string text_of(const TokenSource& source) {
  std::string text;
  for (size_t s = 0; s < source.num_segments(); ++s) {
    for (int32_t t : all_tokens(source, s)) text.push_back(static_cast<char>(t));
  }
  return text;
}

TEST(TokenSource, TextBytesAreTokens) {
  TempDir dir;
  const std::string text = std::string("hello\n\xff\x00world", 13);
  const std::string path = dir.write("t.txt", text);
  TokenSource source = TokenSource::open_text(path);
  EXPECT_EQ(source.num_segments(), 1u);
  EXPECT_EQ(source.total_tokens(), 13u);
  EXPECT_EQ(source.format_vocab_size(), 256);
  EXPECT_EQ(source.segment_path(0), path);
  const std::vector<int32_t> tokens = all_tokens(source, 0);
  EXPECT_EQ(tokens[6], 255);  // bytes are unsigned
  EXPECT_EQ(tokens[7], 0);
  EXPECT_EQ(text_of(source), text);
}

// The fingerprint tells data that changed at a file's ends, in its size or in the files'
// order, and matches the same data under other paths; an edit inside a large file that keeps
// its size passes (documented: it reads 8 KiB a file).
TEST(TokenSource, FingerprintTellsChangedDataApart) {
  TempDir dir;
  std::string big(100000, 'a');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  const auto fp = [&](const std::vector<std::string>& names) {
    std::vector<std::string> paths;
    for (const std::string& n : names) paths.push_back(dir.file(n));
    return TokenSource::open_text_globs(paths).fingerprint();
  };
  dir.write("a.txt", big);
  dir.write("b.txt", "a second, small file\n");
  const uint64_t base = fp({"a.txt", "b.txt"});
  EXPECT_NE(base, 0u);
  EXPECT_EQ(fp({"a.txt", "b.txt"}), base);
  std::filesystem::create_directories(dir.file("copy"));
  dir.write("copy/a.txt", big);
  dir.write("copy/b.txt", "a second, small file\n");
  EXPECT_EQ(fp({"copy/a.txt", "copy/b.txt"}), base);  // moved: the same data
  EXPECT_NE(fp({"b.txt", "a.txt"}), base);            // another order
  std::string edited = big;
  edited[10] = '!';  // at its start
  dir.write("copy/a.txt", edited);
  EXPECT_NE(fp({"copy/a.txt", "b.txt"}), base);
  edited = big;
  edited[big.size() - 10] = '!';  // at its end
  dir.write("copy/a.txt", edited);
  EXPECT_NE(fp({"copy/a.txt", "b.txt"}), base);
  dir.write("copy/a.txt", big + "x");  // longer
  EXPECT_NE(fp({"copy/a.txt", "b.txt"}), base);
  edited = big;
  edited[50000] = '!';  // in the middle: not read
  dir.write("copy/a.txt", edited);
  EXPECT_EQ(fp({"copy/a.txt", "b.txt"}), base);
  // A part of a file (a validation split) has its own.
  EXPECT_NE(TokenSource::open_text(dir.file("a.txt"), 0, 0.9).fingerprint(),
            TokenSource::open_text(dir.file("a.txt"), 0.9, 1).fingerprint());
}

TEST(TokenSource, TextSplitIsDisjointAndCovers) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 1237; ++i) text.push_back(static_cast<char>('a' + i % 26));
  const std::string path = dir.write("t.txt", text);
  for (double val_fraction : {0.0, 0.1, 0.25, 0.5, 0.999, 1.0}) {
    const double split = 1.0 - val_fraction;
    TokenSource train = TokenSource::open_text(path, 0.0, split);
    TokenSource val = TokenSource::open_text(path, split, 1.0);
    EXPECT_EQ(train.total_tokens() + val.total_tokens(), text.size()) << val_fraction;
    EXPECT_EQ(train.total_tokens(), static_cast<uint64_t>(split * text.size())) << val_fraction;
    EXPECT_EQ(text_of(train) + text_of(val), text) << val_fraction;
  }
  TokenSource val = TokenSource::open_text(path, 0.9, 1.0);
  EXPECT_EQ(val.describe(), path + "[1113, 1237)");
}

TEST(TokenSource, RejectsBadFractions) {
  TempDir dir;
  const std::string path = dir.write("t.txt", "abc");
  EXPECT_THROW(TokenSource::open_text(path, 0.6, 0.5), std::invalid_argument);
  EXPECT_THROW(TokenSource::open_text(path, -0.1, 0.5), std::invalid_argument);
  EXPECT_THROW(TokenSource::open_text(path, 0.0, 1.5), std::invalid_argument);
}

TEST(TokenSource, MissingTextFile) {
  TempDir dir;
  const std::string path = dir.file("missing.txt");
  EXPECT_EQ(data_error_of([&] { TokenSource::open_text(path); }),
            path + ": cannot open: No such file or directory");
}

TEST(TokenSource, ShardsInSortedGlobOrder) {
  TempDir dir;
  // Written out of order; bytewise order is 1, 10, 2 and each shard's first token says which.
  for (uint16_t k : {10, 2, 1}) {
    write_token_shard(dir.file("shard_" + std::to_string(k) + ".bin"), {k, 100, 101});
  }
  write_token_shard(dir.file("other.bin"), {7, 7});
  TokenSource source = TokenSource::open_shards({dir.file("shard_*.bin"), dir.file("other.bin")});
  ASSERT_EQ(source.num_segments(), 4u);
  EXPECT_EQ(source.total_tokens(), 11u);
  EXPECT_EQ(source.format_vocab_size(), 65536);
  const int expected_first[] = {1, 10, 2, 7};
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(all_tokens(source, s)[0], expected_first[s]) << s;
  EXPECT_EQ(source.segment_path(1), dir.file("shard_10.bin"));
  EXPECT_EQ(source.describe(), dir.file("shard_1.bin") + ", " + dir.file("shard_10.bin") + ", " +
                                   dir.file("shard_2.bin") + " and 1 more");
}

TEST(TokenSource, GlobMatchingNothing) {
  TempDir dir;
  const std::string pattern = dir.file("*.bin");
  const std::string nothing = data_error_of([&] { TokenSource::open_shards({pattern}); });
  EXPECT_EQ(nothing.rfind("no files match '" + pattern + "' in the directory '" + dir.path() +
                              "'; data.format: tokens reads llm.c's token shards",
                          0),
            0u)
      << nothing;
  EXPECT_NE(nothing.find("dev/data/"), std::string::npos) << "where to get shards: " << nothing;
  // The directory the pattern looks in is missing, or a file: said so, by name.
  const std::string in_missing = dir.file("fineweb10B/fineweb_train_*.bin");
  EXPECT_EQ(data_error_of([&] { expand_globs({in_missing}); }),
            "no files match '" + in_missing + "': the directory '" + dir.file("fineweb10B") +
                "' does not exist");
  const std::string file = dir.write("not_a_dir", "x");
  EXPECT_EQ(data_error_of([&] { expand_globs({file + "/*.bin"}); }),
            "no files match '" + file + "/*.bin': '" + file + "' is not a directory");
  EXPECT_EQ(data_error_of([&] { TokenSource::open_shards({}); }), "no data files given");
  const std::string missing = dir.file("plain.bin");
  EXPECT_EQ(data_error_of([&] { expand_globs({missing}); }),
            missing + ": No such file or directory");
}

TEST(TokenSource, BadShardFailsAtOpen) {
  TempDir dir;
  write_token_shard(dir.file("a.bin"), {1, 2, 3});
  const std::string bad = dir.write("b.bin", shard_bytes(99, 1, 1, {1}));
  const std::string message = data_error_of([&] { TokenSource::open_shards({dir.file("*.bin")}); });
  EXPECT_EQ(message.rfind(bad + ": bad magic 99", 0), 0u) << message;
}

TEST(TokenSource, SplitsShardsByFraction) {
  TempDir dir;
  std::vector<uint16_t> tokens(100);
  for (int i = 0; i < 100; ++i) tokens[i] = static_cast<uint16_t>(i);
  write_token_shard(dir.file("a.bin"), tokens);
  write_token_shard(dir.file("b.bin"), std::vector<uint16_t>(tokens.begin(), tokens.begin() + 10));
  TokenSource val = TokenSource::open_shards({dir.file("*.bin")}, 0.9, 1.0);
  ASSERT_EQ(val.num_segments(), 2u);
  EXPECT_EQ(val.segment_size(0), 10u);
  EXPECT_EQ(val.segment_size(1), 1u);
  EXPECT_EQ(all_tokens(val, 0)[0], 90);
  EXPECT_EQ(all_tokens(val, 1)[0], 9);
}

TEST(TokenSource, TextGlobsGiveOneSegmentPerFile) {
  TempDir dir;
  dir.write("b.txt", "bbbb");
  dir.write("a.txt", "aa");
  TokenSource source = TokenSource::open_text_globs({dir.file("*.txt")});
  ASSERT_EQ(source.num_segments(), 2u);
  EXPECT_EQ(text_of(source), "aabbbb");
}

TEST(TokenSource, CopyChecksRange) {
  TempDir dir;
  TokenSource source = TokenSource::open_text(dir.write("t.txt", "abcdef"));
  int32_t buf[8];
  source.copy(0, 2, 4, buf);
  EXPECT_EQ(buf[0], 'c');
  EXPECT_EQ(buf[3], 'f');
  source.copy(0, 6, 0, buf);  // empty range at the end is fine
  EXPECT_THROW(source.copy(0, 3, 4, buf), std::out_of_range);
  EXPECT_THROW(source.copy(1, 0, 1, buf), std::out_of_range);
}

TEST(TokenSource, VocabChecks) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  write_token_shard(path, {1, 2, 60000, 3});
  TokenSource source = TokenSource::open_shards({path});
  source.validate_vocab(60001);
  EXPECT_EQ(data_error_of([&] { source.validate_vocab(50257); }),
            path + ": token 60000 at position 2 is >= vocab_size 50257");
  int32_t buf[4];
  source.copy(0, 0, 4, buf);  // no limit set: the format's own
  source.set_vocab_size(50257);
  source.copy(0, 0, 2, buf);  // the bad token is not read
  EXPECT_EQ(data_error_of([&] { source.copy(0, 1, 3, buf); }),
            path + ": token 60000 at position 2 is >= vocab_size 50257");
}

}  // namespace
}  // namespace rm

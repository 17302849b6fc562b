#include "worker/data/token_shard.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "worker/data/data_error.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

TEST(TokenShard, WriteThenReadRoundTrips) {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>(i * 37 % 65536));
  tokens.push_back(65535);
  const std::string path = dir.file("a.bin");
  write_token_shard(path, tokens);
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0) << "temporary file left behind";

  TokenShard shard = TokenShard::open(path);
  EXPECT_EQ(shard.path(), path);
  ASSERT_EQ(shard.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(shard.token(i), tokens[i]) << i;

  // Moving keeps the mapping (and the data) with the new owner.
  TokenShard moved = std::move(shard);
  EXPECT_EQ(moved.token(3000), 65535);
  EXPECT_EQ(shard.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
}

TEST(TokenShard, OverwriteReplacesTheFile) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  write_token_shard(path, {1, 2, 3});
  write_token_shard(path, {4, 5});
  TokenShard shard = TokenShard::open(path);
  ASSERT_EQ(shard.size(), 2u);
  EXPECT_EQ(shard.token(0), 4);
}

TEST(TokenShard, BadMagic) {
  TempDir dir;
  const std::string path = dir.write("m.bin", shard_bytes(123, 1, 2, {1, 2}));
  EXPECT_EQ(data_error_of([&] { TokenShard::open(path); }),
            path + ": bad magic 123, expected 20240520 (llm.c token shard)");
}

TEST(TokenShard, BadVersion) {
  TempDir dir;
  const std::string path = dir.write("v.bin", shard_bytes(20240520, 2, 2, {1, 2}));
  const std::string message = data_error_of([&] { TokenShard::open(path); });
  EXPECT_EQ(message.rfind(path + ": unsupported version 2, expected 1", 0), 0u) << message;
}

TEST(TokenShard, TruncatedFile) {
  TempDir dir;
  const std::string path = dir.write("t.bin", shard_bytes(20240520, 1, 100, {1, 2, 3}));
  EXPECT_EQ(data_error_of([&] { TokenShard::open(path); }),
            path + ": truncated: header says 100 tokens (1224 bytes) but file has 1030 bytes");
}

TEST(TokenShard, TrailingBytes) {
  TempDir dir;
  const std::string path = dir.write("x.bin", shard_bytes(20240520, 1, 1, {1, 2}));
  const std::string message = data_error_of([&] { TokenShard::open(path); });
  EXPECT_NE(message.find("trailing bytes: header says 1 tokens"), std::string::npos) << message;
}

TEST(TokenShard, EmptyFileIsShorterThanTheHeader) {
  TempDir dir;
  const std::string path = dir.write("e.bin", "");
  EXPECT_EQ(data_error_of([&] { TokenShard::open(path); }),
            path + ": file has 0 bytes, shorter than the 1024-byte llm.c token shard header");
  const std::string short_path = dir.write("s.bin", std::string(1000, '\0'));
  EXPECT_NE(data_error_of([&] { TokenShard::open(short_path); }).find("file has 1000 bytes"),
            std::string::npos);
}

TEST(TokenShard, ZeroTokenShard) {
  TempDir dir;
  const std::string path = dir.write("z.bin", shard_bytes(20240520, 1, 0, {}));
  EXPECT_EQ(data_error_of([&] { TokenShard::open(path); }),
            path + ": empty shard (header says 0 tokens)");
  EXPECT_THROW(write_token_shard(dir.file("w.bin"), {}), DataError);
}

TEST(TokenShard, NegativeCount) {
  TempDir dir;
  const std::string path = dir.write("n.bin", shard_bytes(20240520, 1, -5, {}));
  EXPECT_NE(data_error_of([&] { TokenShard::open(path); }).find("negative token count -5"),
            std::string::npos);
}

TEST(TokenShard, MissingFileAndDirectory) {
  TempDir dir;
  const std::string missing = dir.file("nope.bin");
  EXPECT_EQ(data_error_of([&] { TokenShard::open(missing); }),
            missing + ": cannot open: No such file or directory");
  EXPECT_EQ(data_error_of([&] { TokenShard::open(dir.path()); }),
            dir.path() + ": a directory, not a regular file");
}

// Hostile files: a FIFO or a device is refused without waiting for a writer or reading, and a
// header that claims 2^31 - 1 tokens (4 GiB) is checked against the file's real size; nothing
// is allocated from the claim (the tokens are read in place from the mapping).
TEST(TokenShard, FifoDeviceAndHugeClaimsAreRefusedAtOnce) {
  TempDir dir;
  const std::string fifo = dir.file("shard.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(data_error_of([&] { TokenShard::open(fifo); }), fifo + ": a FIFO, not a regular file");
  EXPECT_EQ(data_error_of([&] { TokenShard::open("/dev/zero"); }), "/dev/zero: a character device, not a regular file");
  const std::string path = dir.write("huge.bin", shard_bytes(20240520, 1, INT32_MAX, {1, 2}));
  EXPECT_EQ(data_error_of([&] { TokenShard::open(path); }),
            path +
                ": truncated: header says 2147483647 tokens (4294968318 bytes) but file has "
                "1028 bytes");
}

TEST(TokenShard, ValidateVocab) {
  TempDir dir;
  const std::string path = dir.file("v.bin");
  write_token_shard(path, {5, 50256, 50257, 7});
  TokenShard shard = TokenShard::open(path);
  shard.validate_vocab(50258);
  EXPECT_EQ(data_error_of([&] { shard.validate_vocab(50257); }),
            path + ": token 50257 at position 2 is >= vocab_size 50257");
}

}  // namespace
}  // namespace rm

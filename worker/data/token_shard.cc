#include "worker/data/token_shard.h"

#include <limits.h>
#include <string.h>

#include <string>
#include <utility>

#include "io/atomic_file.h"
#include "worker/data/data_error.h"

namespace rm {

// The format is little-endian and we read it in place from the mapping.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards need a little-endian host");

namespace {

int32_t header_word(const MappedFile& file, int index) {
  int32_t word;
  memcpy(&word, file.data() + 4 * index, sizeof word);
  return word;
}

}  // namespace

TokenShard::TokenShard(MappedFile file, uint64_t size)
    : file_(std::move(file)),
      tokens_(reinterpret_cast<const uint16_t*>(file_.data() + kTokenShardHeaderBytes)),
      size_(size) {}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : file_(std::move(other.file_)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  file_ = std::move(other.file_);
  tokens_ = std::exchange(other.tokens_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

TokenShard TokenShard::open(const std::string& path) {
  MappedFile file = MappedFile::open(path);
  const uint64_t bytes = file.size();
  if (bytes < kTokenShardHeaderBytes) {
    throw DataError(path, "file has " + std::to_string(bytes) + " bytes, shorter than the " +
                              std::to_string(kTokenShardHeaderBytes) +
                              "-byte llm.c token shard header");
  }
  const int32_t magic = header_word(file, 0);
  if (magic != kTokenShardMagic) {
    throw DataError(path, "bad magic " + std::to_string(magic) + ", expected " +
                              std::to_string(kTokenShardMagic) + " (llm.c token shard)");
  }
  const int32_t version = header_word(file, 1);
  if (version != kTokenShardVersion) {
    throw DataError(path, "unsupported version " + std::to_string(version) + ", expected " +
                              std::to_string(kTokenShardVersion) + " (uint16 GPT-2 tokens)");
  }
  const int32_t count = header_word(file, 2);
  if (count < 0) throw DataError(path, "negative token count " + std::to_string(count));
  if (count == 0) throw DataError(path, "empty shard (header says 0 tokens)");
  const uint64_t expected = kTokenShardHeaderBytes + 2 * static_cast<uint64_t>(count);
  if (bytes != expected) {
    throw DataError(path, std::string(bytes < expected ? "truncated" : "trailing bytes") +
                              ": header says " + std::to_string(count) + " tokens (" +
                              std::to_string(expected) + " bytes) but file has " +
                              std::to_string(bytes) + " bytes");
  }
  return TokenShard(std::move(file), static_cast<uint64_t>(count));
}

void TokenShard::validate_vocab(int vocab_size) const {
  for (uint64_t i = 0; i < size_; ++i) {
    if (tokens_[i] >= vocab_size) {
      throw DataError(path(), "token " + std::to_string(tokens_[i]) + " at position " +
                                  std::to_string(i) + " is >= vocab_size " +
                                  std::to_string(vocab_size));
    }
  }
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.empty()) throw DataError(path, "refusing to write an empty token shard");
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw DataError(path, "too many tokens for one shard: " + std::to_string(tokens.size()));
  }
  int32_t header[256] = {};
  header[0] = kTokenShardMagic;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  try {
    AtomicFileWriter out(path);  // durable: fsync, rename, fsync the directory
    out.append(header, sizeof header);
    out.append(tokens.data(), tokens.size() * sizeof(uint16_t));
    out.commit();
  } catch (const IoError& e) {
    throw DataError(e.what());
  }
}

}  // namespace rm

// llm.c token shards: reading (mmap, validated up front) and writing (atomic).
//
// Format (llm.c dev/data, GPT-2 tokens): a header of 256 little-endian int32, where
// header[0] = 20240520 (magic), header[1] = 1 (version), header[2] = token count; then
// `count` little-endian uint16 tokens, and nothing after them. The header is validated
// completely at open(), so a bad file fails at start-up and never mid-run.
//
// Errors are DataError "PATH: what is wrong". Token values are checked against a model's
// vocabulary only on request (validate_vocab), because that is a full scan of the file.
// TokenShard is move-only (it owns a MappedFile); const methods are thread-safe.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "worker/data/mapped_file.h"

namespace rm {

constexpr int32_t kTokenShardMagic = 20240520;
constexpr int32_t kTokenShardVersion = 1;
constexpr uint64_t kTokenShardHeaderBytes = 256 * 4;

class TokenShard {
 public:
  // Maps and validates `path`; throws DataError on any problem.
  static TokenShard open(const std::string& path);

  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;

  const std::string& path() const { return file_.path(); }
  uint64_t size() const { return size_; }  // tokens, >= 1
  // The tokens as stored (little-endian; we only build on little-endian hosts).
  const uint16_t* tokens() const { return tokens_; }
  uint16_t token(uint64_t i) const { return tokens_[i]; }  // unchecked: i < size()

  // Throws DataError "PATH: token T at position P is >= vocab_size V" for the first token
  // outside [0, vocab_size). Reads the whole shard.
  void validate_vocab(int vocab_size) const;

 private:
  TokenShard(MappedFile file, uint64_t size);

  MappedFile file_;
  const uint16_t* tokens_ = nullptr;
  uint64_t size_ = 0;
};

// Writes `tokens` as an llm.c shard with io/atomic_file.h (temporary file, fsync, rename, fsync
// the directory), so PATH is either absent, the old file, or the complete new one. Throws DataError on I/O
// errors and for an empty vector or more than INT32_MAX tokens (which the reader rejects).
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace rm

#include "worker/data/token_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <utility>

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

// write(2) until done; false with errno set on failure.
bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Makes a finished rename durable (LevelDB's SetCurrentFile does the same).
void fsync_parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw DataError(dir, std::string("cannot open directory to fsync: ") + strerror(errno));
  const int rc = fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw DataError(dir, std::string("fsync failed: ") + strerror(err));
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

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw DataError(tmp, strerror(errno));
  const auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw DataError(tmp, std::string(what) + ": " + strerror(err));
  };
  if (!write_all(fd, header, sizeof header)) fail("write failed");
  if (!write_all(fd, tokens.data(), tokens.size() * sizeof(uint16_t))) fail("write failed");
  if (fsync(fd) != 0) fail("fsync failed");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw DataError(tmp, std::string("close failed: ") + strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw DataError(path, std::string("rename from .tmp failed: ") + strerror(err));
  }
  fsync_parent_dir(path);
}

}  // namespace rm

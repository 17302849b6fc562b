// TokenSource: a read-only sequence of tokens in one or more segments.
//
// A segment is a contiguous token range that samples must not cross: one per shard, or one
// per text file, or the train (or val) part of a file. Two backings:
//   - text: a file read as bytes, each byte one token (vocabulary 256);
//   - llm.c token shards (token_shard.h): uint16 tokens (vocabulary <= 65536).
// Files are memory-mapped, so opening is cheap and pages load as samples touch them.
//
// Splitting: the [begin_fraction, end_fraction) arguments keep tokens
// [floor(begin * n), floor(end * n)) of each file with n tokens. Passing the same double to
// the end of one source and the begin of another (train = [0, 1 - f), val = [1 - f, 1))
// gives disjoint sources that together cover every file.
//
// Move-only (owns the mappings). Const methods are thread-safe; set_vocab_size is not and
// belongs to setup.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "worker/data/encoded_text.h"
#include "worker/data/mapped_file.h"
#include "worker/data/token_shard.h"

namespace rm {

class TokenSource {
 public:
  // One text file, taken literally (no glob expansion).
  static TokenSource open_text(const std::string& path, double begin_fraction = 0.0,
                               double end_fraction = 1.0);
  // Text files named by paths or globs (file_glob.h), one segment per file.
  static TokenSource open_text_globs(const std::vector<std::string>& globs,
                                     double begin_fraction = 0.0, double end_fraction = 1.0);
  // Token shards named by paths or globs, one segment per shard. Every shard is validated
  // here, so a bad shard fails at start-up.
  static TokenSource open_shards(const std::vector<std::string>& globs, double begin_fraction = 0.0,
                                 double end_fraction = 1.0);
  // Text files encoded with a tokenizer (encoded_text.h), one segment per file; the
  // format's vocabulary is `vocab_size`, the tokenizer's. The source shares the tokens.
  static TokenSource open_encoded(const std::vector<EncodedText>& files, int vocab_size,
                                  double begin_fraction = 0.0, double end_fraction = 1.0);
  // All four throw DataError for unusable files and std::invalid_argument unless
  // 0 <= begin_fraction <= end_fraction <= 1.

  TokenSource(TokenSource&&) noexcept = default;
  TokenSource& operator=(TokenSource&&) noexcept = default;

  size_t num_segments() const { return segments_.size(); }
  uint64_t segment_size(size_t segment) const { return segments_.at(segment).size; }
  const std::string& segment_path(size_t segment) const { return segments_.at(segment).path; }
  uint64_t total_tokens() const { return total_tokens_; }
  // 256 for text, 65536 for shards, the tokenizer's for encoded text: what the format can
  // hold, not what a model needs.
  int format_vocab_size() const { return format_vocab_size_; }

  // Writes tokens [pos, pos + count) of `segment` to dst as int32.
  // Throws std::out_of_range if the range is not inside the segment, and DataError
  // "PATH: token T at position P is >= vocab_size V" if set_vocab_size was given a smaller
  // vocabulary than the data uses (P is the position in the file).
  void copy(size_t segment, uint64_t pos, uint64_t count, int32_t* dst) const;

  // Makes copy() reject tokens >= vocab_size. The check costs one compare per token copied,
  // so a corrupt token fails loudly when it is read instead of at a full up-front scan of
  // possibly many gigabytes. validate_vocab does the full scan for those who want it.
  void set_vocab_size(int vocab_size);
  void validate_vocab(int vocab_size) const;

  // A fingerprint of the tokens, for telling whether the data changed between runs or differs
  // between ranks: each segment's size and its first and last 4 KiB of tokens as stored, in
  // order (XXH3, 64 bits; never 0). Not every byte -- it reads 8 KiB a file, not the gigabytes --
  // so an edit inside a file that keeps its size passes. Paths are not in it: the same data
  // moved elsewhere still matches.
  uint64_t fingerprint() const;

  // For messages: "a.bin, b.bin, c.bin and 9 more"; a partial file shows its token range,
  // "input.txt[1003854, 1115394)".
  std::string describe() const;

 private:
  struct Segment {
    std::string path;
    const uint8_t* data;   // the first token of the segment, inside a mapping owned below
    uint64_t first;        // index of that token in its file (for messages)
    uint64_t size;         // tokens
    uint64_t file_tokens;  // tokens in the whole file
    int width;             // bytes per token: 1 (text) or 2 (shard)
  };

  TokenSource() = default;
  void add_segment(const std::string& path, const uint8_t* tokens, uint64_t file_tokens, int width,
                   double begin_fraction, double end_fraction);
  std::string describe_segment(const Segment& segment) const;

  // Owners of the mappings that segments point into (moving them keeps the addresses).
  std::vector<MappedFile> text_files_;
  std::vector<TokenShard> shards_;
  std::vector<std::shared_ptr<const std::vector<uint16_t>>> encoded_;
  std::vector<Segment> segments_;
  uint64_t total_tokens_ = 0;
  int format_vocab_size_ = 0;
  int vocab_limit_ = 0;
};

}  // namespace rm

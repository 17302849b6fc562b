#include "worker/data/token_source.h"

#include <math.h>
#include <string.h>

#include <xxhash.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <utility>

#include "worker/data/data_error.h"
#include "worker/data/file_glob.h"

namespace rm {
namespace {

void check_fractions(double begin_fraction, double end_fraction) {
  // Written so that NaN fails too.
  if (!(0.0 <= begin_fraction && begin_fraction <= end_fraction && end_fraction <= 1.0)) {
    throw std::invalid_argument(
        "TokenSource: need 0 <= begin_fraction <= end_fraction <= 1, got [" +
        std::to_string(begin_fraction) + ", " + std::to_string(end_fraction) + ")");
  }
}

uint64_t split_point(double fraction, uint64_t n) {
  const double point = floor(fraction * static_cast<double>(n));
  return point >= static_cast<double>(n) ? n : static_cast<uint64_t>(point);
}

}  // namespace

TokenSource TokenSource::open_text(const std::string& path, double begin_fraction,
                                   double end_fraction) {
  check_fractions(begin_fraction, end_fraction);
  TokenSource source;
  source.format_vocab_size_ = source.vocab_limit_ = 256;
  source.text_files_.push_back(MappedFile::open(path));
  const MappedFile& file = source.text_files_.back();
  source.add_segment(path, file.data(), file.size(), 1, begin_fraction, end_fraction);
  return source;
}

TokenSource TokenSource::open_text_globs(const std::vector<std::string>& globs,
                                         double begin_fraction, double end_fraction) {
  check_fractions(begin_fraction, end_fraction);
  TokenSource source;
  source.format_vocab_size_ = source.vocab_limit_ = 256;
  for (const std::string& path : expand_globs(globs)) {
    source.text_files_.push_back(MappedFile::open(path));
    const MappedFile& file = source.text_files_.back();
    source.add_segment(path, file.data(), file.size(), 1, begin_fraction, end_fraction);
  }
  return source;
}

TokenSource TokenSource::open_shards(const std::vector<std::string>& globs, double begin_fraction,
                                     double end_fraction) {
  check_fractions(begin_fraction, end_fraction);
  TokenSource source;
  source.format_vocab_size_ = source.vocab_limit_ = 65536;
  std::vector<std::string> paths;
  try {
    paths = expand_globs(globs);
  } catch (const DataError& e) {
    if (globs.empty()) throw;
    // Say where such files come from: a user who copied a job file may not know the format.
    throw DataError(std::string(e.what()) +
                    "; data.format: tokens reads llm.c's token shards (a 256 x int32 header, then "
                    "uint16 token ids), which llm.c's dev/data/ scripts make (fineweb.py, "
                    "tinyshakespeare.py); data.format: text trains on any file, a byte a token");
  }
  for (const std::string& path : paths) {
    source.shards_.push_back(TokenShard::open(path));
    const TokenShard& shard = source.shards_.back();
    source.add_segment(path, reinterpret_cast<const uint8_t*>(shard.tokens()), shard.size(), 2,
                       begin_fraction, end_fraction);
  }
  return source;
}

TokenSource TokenSource::open_encoded(const std::vector<EncodedText>& files, int vocab_size,
                                      double begin_fraction, double end_fraction) {
  check_fractions(begin_fraction, end_fraction);
  if (vocab_size < 1 || vocab_size > 65536) {
    throw std::invalid_argument("TokenSource::open_encoded: vocab_size must be in [1, 65536]");
  }
  TokenSource source;
  source.format_vocab_size_ = source.vocab_limit_ = vocab_size;
  for (const EncodedText& file : files) {
    source.encoded_.push_back(file.tokens);
    const std::vector<uint16_t>& tokens = *file.tokens;
    source.add_segment(file.path,
                       tokens.empty() ? nullptr : reinterpret_cast<const uint8_t*>(tokens.data()),
                       tokens.size(), 2, begin_fraction, end_fraction);
  }
  return source;
}

void TokenSource::add_segment(const std::string& path, const uint8_t* tokens, uint64_t file_tokens,
                              int width, double begin_fraction, double end_fraction) {
  const uint64_t begin = split_point(begin_fraction, file_tokens);
  const uint64_t end = split_point(end_fraction, file_tokens);
  const uint8_t* data = tokens == nullptr ? nullptr : tokens + begin * width;
  segments_.push_back(Segment{path, data, begin, end - begin, file_tokens, width});
  total_tokens_ += end - begin;
}

uint64_t TokenSource::fingerprint() const {
  constexpr uint64_t kEdge = 4096;  // bytes hashed at each end of a segment
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state);
  for (const Segment& seg : segments_) {
    const uint64_t bytes = seg.size * static_cast<uint64_t>(seg.width);
    const uint64_t head[2] = {bytes, static_cast<uint64_t>(seg.width)};
    XXH3_64bits_update(state, head, sizeof head);
    XXH3_64bits_update(state, seg.data, std::min(bytes, kEdge));
    if (bytes > kEdge) {
      const uint64_t tail = std::min(bytes - kEdge, kEdge);
      XXH3_64bits_update(state, seg.data + bytes - tail, tail);
    }
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h == 0 ? 1 : h;  // 0 means "not recorded" where it is stored
}

void TokenSource::copy(size_t segment, uint64_t pos, uint64_t count, int32_t* dst) const {
  const Segment& seg = segments_.at(segment);
  if (pos > seg.size || count > seg.size - pos) {
    throw std::out_of_range("TokenSource::copy: tokens [" + std::to_string(pos) + ", " +
                            std::to_string(pos + count) + ") outside segment " +
                            std::to_string(segment) + " of " + std::to_string(seg.size) +
                            " tokens");
  }
  if (seg.width == 1) {
    const uint8_t* src = seg.data + pos;
    for (uint64_t i = 0; i < count; ++i) dst[i] = src[i];
  } else {
    // memcpy per token: the mapping is 2-byte aligned, but this keeps the read well-defined
    // without relying on that; compilers turn it into a plain load.
    const uint8_t* src = seg.data + 2 * pos;
    for (uint64_t i = 0; i < count; ++i) {
      uint16_t token;
      memcpy(&token, src + 2 * i, sizeof token);
      dst[i] = token;
    }
  }
  if (vocab_limit_ < format_vocab_size_) {
    for (uint64_t i = 0; i < count; ++i) {
      if (dst[i] >= vocab_limit_) {
        throw DataError(seg.path, "token " + std::to_string(dst[i]) + " at position " +
                                      std::to_string(seg.first + pos + i) + " is >= vocab_size " +
                                      std::to_string(vocab_limit_));
      }
    }
  }
}

void TokenSource::set_vocab_size(int vocab_size) {
  if (vocab_size < 1) throw std::invalid_argument("TokenSource: vocab_size must be >= 1");
  vocab_limit_ = vocab_size < format_vocab_size_ ? vocab_size : format_vocab_size_;
}

void TokenSource::validate_vocab(int vocab_size) const {
  if (vocab_size >= format_vocab_size_) return;  // nothing the format can hold is too big
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    for (uint64_t i = 0; i < seg.size; ++i) {
      const int token = seg.width == 1 ? seg.data[i] : seg.data[2 * i] | seg.data[2 * i + 1] << 8;
      if (token >= vocab_size) {
        throw DataError(seg.path, "token " + std::to_string(token) + " at position " +
                                      std::to_string(seg.first + i) + " is >= vocab_size " +
                                      std::to_string(vocab_size));
      }
    }
  }
}

std::string TokenSource::describe_segment(const Segment& segment) const {
  if (segment.first == 0 && segment.size == segment.file_tokens) return segment.path;
  return segment.path + "[" + std::to_string(segment.first) + ", " +
         std::to_string(segment.first + segment.size) + ")";
}

std::string TokenSource::describe() const {
  constexpr size_t kShown = 3;
  std::string text;
  for (size_t s = 0; s < segments_.size() && s < kShown; ++s) {
    if (s > 0) text += ", ";
    text += describe_segment(segments_[s]);
  }
  if (segments_.size() > kShown) {
    text += " and " + std::to_string(segments_.size() - kShown) + " more";
  }
  return text;
}

}  // namespace rm

// Fuzz target: opening an llm.c token shard (token_shard.h, over mapped_file.h) and reading it
// the way training does (token_source.h).
//
// Input: a whole shard file (1 KiB header of int32 words, then uint16 tokens), written to the
// scratch directory as `name` and opened with TokenShard::open().
//
// Contract (fuzz/fuzz_target.h): accepted = the shard opens; rejected = DataError whose message
// starts with the file's path. When it opens, its size must be the header's count and the
// file's length, and every token is read and compared with the file's bytes: through
// TokenShard, through TokenSource::copy() whole and split 90/10 as a train/val split does, and
// after a rewrite with write_token_shard(). The vocabulary checks must accept the largest token
// + 1 and refuse the largest token with exactly "PATH: token T at position P is >= vocab_size
// V" for its first occurrence. Anything else is a finding: another exception, a disagreement
// (std::logic_error), a crash, a sanitizer report (a read past the mapping), a hang.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz/corpus_replay_test.cc
// replays fuzz/corpora/token_shard/ through it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_dir.h"
#include "worker/data/data_error.h"
#include "worker/data/token_shard.h"
#include "worker/data/token_source.h"

namespace rm {
namespace {

// The DataError `read` throws, checked to be `want`; a finding if it throws none or another.
template <typename F>
void expect_error(const std::string& want, F&& read) {
  try {
    read();
  } catch (const DataError& e) {
    fuzz::require(e.what() == want, "expected the error '" + want + "', got '" + e.what() + "'");
    return;
  }
  fuzz::require(false, "expected the error '" + want + "', got none");
}

// The tokens of `source`'s only segment, through copy().
std::vector<uint16_t> copy_all(const TokenSource& source) {
  fuzz::require(source.num_segments() == 1, "one shard is not one segment");
  const uint64_t n = source.segment_size(0);
  std::vector<int32_t> got(n);
  source.copy(0, 0, n, got.data());
  std::vector<uint16_t> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    fuzz::require(got[i] >= 0 && got[i] <= 65535, "copy() gave a token outside uint16");
    out[i] = static_cast<uint16_t>(got[i]);
  }
  return out;
}

// TokenSource over the shard: whole, as a train/val split, with a vocabulary limit.
void check_source(const std::string& path, const std::vector<uint16_t>& tokens, uint16_t max) {
  const TokenSource whole = TokenSource::open_shards({path});
  fuzz::require(whole.total_tokens() == tokens.size() && copy_all(whole) == tokens,
                "TokenSource reads the shard differently from TokenShard");
  bool out_of_range = false;
  try {
    int32_t one;
    whole.copy(0, tokens.size(), 1, &one);
  } catch (const std::out_of_range&) {
    out_of_range = true;
  }
  fuzz::require(out_of_range, "copy() past the segment's end was not refused");

  const TokenSource train = TokenSource::open_shards({path}, 0.0, 0.9);
  const TokenSource val = TokenSource::open_shards({path}, 0.9, 1.0);
  std::vector<uint16_t> joined = copy_all(train);
  const std::vector<uint16_t> rest = copy_all(val);
  joined.insert(joined.end(), rest.begin(), rest.end());
  fuzz::require(joined == tokens, "the 90/10 split does not cover the shard exactly once");

  if (max == 0) return;
  size_t first = 0;
  while (tokens[first] != max) ++first;
  const std::string want = path + ": token " + std::to_string(max) + " at position " +
                           std::to_string(first) + " is >= vocab_size " + std::to_string(max);
  expect_error(want, [&] { whole.validate_vocab(max); });
  TokenSource limited = TokenSource::open_shards({path});
  limited.set_vocab_size(max);
  std::vector<int32_t> dst(tokens.size());
  expect_error(want, [&] { limited.copy(0, 0, tokens.size(), dst.data()); });
}

void check_shard(const TokenShard& shard, std::string_view file) {
  int32_t count = 0;
  std::memcpy(&count, file.data() + 8, sizeof count);  // opened: the header is there
  fuzz::require(count >= 1 && shard.size() == static_cast<uint64_t>(count) &&
                    file.size() == kTokenShardHeaderBytes + 2 * shard.size(),
                "the shard's size disagrees with its header or its length");
  std::vector<uint16_t> tokens(shard.size());
  uint16_t max = 0;
  for (uint64_t i = 0; i < shard.size(); ++i) {
    uint16_t want;
    std::memcpy(&want, file.data() + kTokenShardHeaderBytes + 2 * i, sizeof want);
    fuzz::require(shard.token(i) == want && shard.tokens()[i] == want,
                  "token " + std::to_string(i) + " reads back differently from the file");
    tokens[i] = want;
    if (want > max) max = want;
  }
  shard.validate_vocab(static_cast<int>(max) + 1);
  if (max > 0) {
    size_t first = 0;
    while (tokens[first] != max) ++first;
    expect_error(shard.path() + ": token " + std::to_string(max) + " at position " +
                     std::to_string(first) + " is >= vocab_size " + std::to_string(max),
                 [&] { shard.validate_vocab(max); });
  }
  // Globs read the path as a pattern: only a path free of * ? [ names just this file.
  if (shard.path().find_first_of("*?[") == std::string::npos) {
    check_source(shard.path(), tokens, max);
  }

  const std::string copy = fuzz::scratch_dir() + "/rewritten.bin";
  write_token_shard(copy, tokens);
  const TokenShard back = TokenShard::open(copy);
  fuzz::require(back.size() == tokens.size() &&
                    std::memcmp(back.tokens(), tokens.data(), 2 * tokens.size()) == 0,
                "the rewritten shard reads back differently");
}

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  const std::string path = fuzz::write_scratch_file(name, input);
  std::optional<TokenShard> shard;
  try {
    shard.emplace(TokenShard::open(path));
  } catch (const DataError& e) {
    return fuzz::rejected(e.what(), path + ": ");
  }
  // A moved shard keeps its mapping: TokenSource relies on that.
  const uint16_t* tokens = shard->tokens();
  const TokenShard moved = std::move(*shard);
  fuzz::require(moved.tokens() == tokens && shard->tokens() == nullptr && shard->size() == 0,
                "moving a TokenShard moved its mapping");
  check_shard(moved, input);
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}

// WindowDataset: fixed-length training samples cut from a TokenSource, in the global order.
//
// A sample is seq_len + 1 consecutive tokens of one segment (never crossing a segment
// boundary): inputs are the first seq_len, targets the same window shifted by one token.
//
// Training order. Windows sit on a grid of stride seq_len, offset by a per-(epoch, segment)
// shift in [0, seq_len) so that successive epochs see the text cut at different places. The
// sample at global index g is
//     epoch = g / num_windows(),  i = g % num_windows(),
//     window = permute_index(seed, epoch, i, num_windows())     (sample_order.h)
// so each epoch visits every window exactly once, and the result is a pure function of
// (seed, g): a global batch is the same on any number of ranks, each rank fills its slice by
// passing its own first global index, and resume needs only the global sample cursor.
//
// Window counts. A segment of n tokens gives max(1, floor(n / seq_len) - 1) training windows
// when n >= seq_len + 1 (the last grid slot is given up so that every shift fits; a segment
// shorter than 2 * seq_len still gives its one window, shifted within its slack), and none
// when n <= seq_len. Evaluation uses floor((n - 1) / seq_len) non-overlapping, unshifted
// windows per segment in file order.
//
// Move-only (owns the TokenSource). Const methods are thread-safe and allocate nothing.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "worker/data/token_source.h"

namespace rm {

// Where a sample lives.
struct Window {
  uint64_t index;   // window number in file order, in [0, num_windows()) (or eval count)
  size_t segment;   // segment of the TokenSource
  uint64_t offset;  // first input token, within the segment
};

class WindowDataset {
 public:
  // `role` names the data in messages ("train", "val"). Throws std::invalid_argument if
  // seq_len < 1, and DataError "FILES: train data has 100 tokens, fewer than seq_len+1 =
  // 257" (or the per-segment variant) if there is not one whole window.
  WindowDataset(TokenSource source, int seq_len, const std::string& role = "data");

  WindowDataset(WindowDataset&&) noexcept = default;
  WindowDataset& operator=(WindowDataset&&) noexcept = default;

  int seq_len() const { return seq_len_; }
  uint64_t num_windows() const { return train_start_.back(); }      // >= 1, per epoch
  uint64_t num_eval_windows() const { return eval_start_.back(); }  // >= num_windows()
  uint64_t total_tokens() const { return source_.total_tokens(); }
  uint64_t epoch(uint64_t global_index) const { return global_index / num_windows(); }
  const TokenSource& source() const { return source_; }
  // source().fingerprint() as the data was when it was opened (taken then, once: a save need
  // not read the files' ends again, nor record bytes changed under the run since).
  uint64_t fingerprint() const { return fingerprint_; }

  // The sample at global position `global_index` of the run seeded by `seed`.
  Window sample(uint64_t seed, uint64_t global_index) const;
  // The k-th evaluation window in file order, k taken modulo num_eval_windows().
  Window eval_window(uint64_t k) const;

  // Writes seq_len inputs and seq_len targets of one window.
  void fill_window(const Window& window, int32_t* inputs, int32_t* targets) const;
  // Samples first_global_index .. + count - 1, as count rows of seq_len ints each.
  void fill_batch(uint64_t seed, uint64_t first_global_index, int count, int32_t* inputs,
                  int32_t* targets) const;
  // Evaluation windows first_window .. + count - 1 (wrapping), as count rows of seq_len.
  void fill_eval_batch(uint64_t first_window, int count, int32_t* inputs, int32_t* targets) const;

 private:
  uint64_t shift(uint64_t seed, uint64_t epoch, size_t segment) const;

  TokenSource source_;
  int seq_len_;
  uint64_t fingerprint_ = 0;
  // Prefix sums over segments (size num_segments + 1): window w lives in the segment s with
  // start[s] <= w < start[s + 1].
  std::vector<uint64_t> train_start_;
  std::vector<uint64_t> eval_start_;
  // Per segment: training shifts are drawn from [0, shift_range_[s]); seq_len unless the
  // segment is shorter than 2 * seq_len.
  std::vector<uint64_t> shift_range_;
};

}  // namespace rm

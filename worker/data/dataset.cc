#include "worker/data/dataset.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "kernels/counter_rng.h"
#include "worker/data/data_error.h"
#include "worker/data/sample_order.h"

namespace rm {
namespace {

// Which segment holds window w (see the prefix sums in dataset.h). Segments with no windows
// have start[s] == start[s + 1] and are skipped by upper_bound.
size_t find_segment(const std::vector<uint64_t>& start, uint64_t w) {
  return static_cast<size_t>(std::upper_bound(start.begin(), start.end(), w) - start.begin()) - 1;
}

}  // namespace

WindowDataset::WindowDataset(TokenSource source, int seq_len, const std::string& role)
    : source_(std::move(source)), seq_len_(seq_len) {
  if (seq_len < 1) {
    throw std::invalid_argument("WindowDataset: seq_len must be >= 1, got " +
                                std::to_string(seq_len));
  }
  fingerprint_ = source_.fingerprint();
  const uint64_t len = static_cast<uint64_t>(seq_len);
  const size_t segments = source_.num_segments();
  train_start_.assign(1, 0);
  eval_start_.assign(1, 0);
  uint64_t longest = 0;
  for (size_t s = 0; s < segments; ++s) {
    const uint64_t n = source_.segment_size(s);
    longest = std::max(longest, n);
    uint64_t train = 0, eval = 0, range = 0;
    if (n >= len + 1) {
      train = std::max<uint64_t>(1, n / len - 1);
      range = std::min(len, n - train * len);
      eval = (n - 1) / len;
    }
    train_start_.push_back(train_start_.back() + train);
    eval_start_.push_back(eval_start_.back() + eval);
    shift_range_.push_back(range);
  }

  if (num_windows() == 0) {
    const std::string need = "fewer than seq_len+1 = " + std::to_string(len + 1);
    const uint64_t total = source_.total_tokens();
    if (segments <= 1 || total <= len) {
      throw DataError(source_.describe(),
                      role + " data has " + std::to_string(total) + " tokens, " + need);
    }
    throw DataError(source_.describe(), role + " data has " + std::to_string(total) +
                                            " tokens in " + std::to_string(segments) +
                                            " files or parts, but the longest has " +
                                            std::to_string(longest) + ", " + need +
                                            " (a sample never crosses a file boundary)");
  }
}

uint64_t WindowDataset::shift(uint64_t seed, uint64_t epoch, size_t segment) const {
  // The modulo bias is below range / 2^64, i.e. none that matters.
  return rng_u64(seed, RngPurpose::kShift, epoch, segment) % shift_range_[segment];
}

Window WindowDataset::sample(uint64_t seed, uint64_t global_index) const {
  const uint64_t windows = num_windows();
  const uint64_t epoch = global_index / windows;
  const uint64_t w = permute_index(seed, epoch, global_index % windows, windows);
  const size_t s = find_segment(train_start_, w);
  const uint64_t offset =
      (w - train_start_[s]) * static_cast<uint64_t>(seq_len_) + shift(seed, epoch, s);
  return Window{w, s, offset};
}

Window WindowDataset::eval_window(uint64_t k) const {
  const uint64_t w = k % num_eval_windows();
  const size_t s = find_segment(eval_start_, w);
  return Window{w, s, (w - eval_start_[s]) * static_cast<uint64_t>(seq_len_)};
}

void WindowDataset::fill_window(const Window& window, int32_t* inputs, int32_t* targets) const {
  // Two overlapping copies instead of one of seq_len + 1 into scratch: no allocation, and
  // the second read hits the cache.
  const uint64_t len = static_cast<uint64_t>(seq_len_);
  source_.copy(window.segment, window.offset, len, inputs);
  source_.copy(window.segment, window.offset + 1, len, targets);
}

void WindowDataset::fill_batch(uint64_t seed, uint64_t first_global_index, int count,
                               int32_t* inputs, int32_t* targets) const {
  if (count < 0) throw std::invalid_argument("WindowDataset::fill_batch: negative count");
  const size_t len = static_cast<size_t>(seq_len_);
  for (int j = 0; j < count; ++j) {
    fill_window(sample(seed, first_global_index + j), inputs + j * len, targets + j * len);
  }
}

void WindowDataset::fill_eval_batch(uint64_t first_window, int count, int32_t* inputs,
                                    int32_t* targets) const {
  if (count < 0) throw std::invalid_argument("WindowDataset::fill_eval_batch: negative count");
  const size_t len = static_cast<size_t>(seq_len_);
  const uint64_t first = first_window % num_eval_windows();
  for (int j = 0; j < count; ++j) {
    fill_window(eval_window(first + j), inputs + j * len, targets + j * len);
  }
}

}  // namespace rm

#include "worker/data/sample_order.h"

#include <stdexcept>
#include <string>

#include "kernels/counter_rng.h"

namespace rm {
namespace {

// Each round rewrites one half from the other. Luby-Rackoff needs 4 rounds of a balanced
// network for a pseudo-random permutation; unbalanced halves want more, and a round costs a
// few nanoseconds next to copying a window of tokens, so we are generous.
constexpr int kRounds = 8;

}  // namespace

uint64_t permute_index(uint64_t seed, uint64_t epoch, uint64_t i, uint64_t n) {
  if (i >= n) {
    throw std::out_of_range("permute_index: index " + std::to_string(i) +
                            " not below n = " + std::to_string(n));
  }
  if (n == 1) return 0;

  // Domain [0, 2^bits), bits in [1, 64]; halves of at most 32 bits each.
  const int bits = 64 - __builtin_clzll(n - 1);
  const int left_bits = bits / 2;
  const int right_bits = bits - left_bits;
  const uint64_t left_mask = (uint64_t{1} << left_bits) - 1;
  const uint64_t right_mask = (uint64_t{1} << right_bits) - 1;

  // Round function: a half (< 2^32) keyed by round and domain size, so different n use
  // unrelated permutations rather than restrictions of one another.
  const auto round_fn = [&](int round, uint64_t half) {
    const uint64_t word =
        half | (static_cast<uint64_t>(round) << 32) | (static_cast<uint64_t>(bits) << 40);
    return rng_u64(seed, RngPurpose::kShuffle, epoch, word);
  };

  // Cycle walking terminates: i < n lies on a cycle of the permutation of [0, 2^bits), and
  // that cycle returns to i itself if nothing else below n comes first.
  uint64_t x = i;
  do {
    uint64_t left = x >> right_bits;
    uint64_t right = x & right_mask;
    for (int round = 0; round < kRounds; ++round) {
      if (round % 2 == 0) {
        left ^= round_fn(round, right) & left_mask;
      } else {
        right ^= round_fn(round, left) & right_mask;
      }
    }
    x = (left << right_bits) | right;
  } while (x >= n);
  return x;
}

}  // namespace rm

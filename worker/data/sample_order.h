// The global sample order: which sample the i-th draw of an epoch is.
//
// permute_index(seed, epoch, i, n) is a pure function and, for each (seed, epoch, n), a
// bijection of [0, n). It is what makes the data order independent of the rank count: every
// rank can compute the sample at any global position without talking to the others and
// without an O(n) shuffled table, and resume needs only the global sample cursor.
//
// Method: a keyed, alternating (unbalanced) Feistel network over [0, 2^k), 2^k the smallest
// power of two >= n, with cycle walking: apply the permutation again until the value lands in
// [0, n). Because 2^k < 2n, the expected number of walks is below 2. O(1) memory, any n >= 1.
// Round keys come from counter_rng (RngPurpose::kShuffle) keyed by (seed, epoch).
//
// This is a pseudo-random permutation good enough for shuffling data, not for cryptography.
// Thread-safe (no state).
#pragma once

#include <stdint.h>

namespace rm {

// Returns the position, in [0, n), of the i-th draw of epoch `epoch`.
// Throws std::out_of_range unless 0 <= i < n (so n == 0 always throws).
uint64_t permute_index(uint64_t seed, uint64_t epoch, uint64_t i, uint64_t n);

}  // namespace rm

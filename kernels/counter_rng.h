// Counter-based random numbers: every draw is a pure function of (seed, purpose, a, b).
//
// There is no generator state to carry, save, or advance, so a draw does not depend on call
// order, on which rank or thread makes it, or on how many draws came before. Callers choose
// the counter words: e.g. init uses (kInit, tensor id, element index), dropout uses
// (kDropout, global sample index, site|word: kernels/dropout_mask.h), the data order uses
// (kShuffle, epoch, round|value).
//
// Construction: the four words are absorbed one at a time by h = mix64(h + x * kGamma), where
// mix64 is the SplitMix64 finaliser (Stafford's variant 13). For a fixed prefix the last step
// is exactly the SplitMix64 output sequence started at state h and read at position b, which
// passes BigCrush; a different prefix gives an unrelated starting state. Each step is a
// bijection of x for a fixed h, so distinct b (all else equal) never collide.
//
// Header-only and dependency-free so that CUDA kernels can share it (RM_RNG_HD marks the
// functions __host__ __device__ under nvcc). All functions are thread-safe.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define RM_RNG_HD __host__ __device__
#else
#define RM_RNG_HD
#endif

namespace rm {

// What a draw is for. Each purpose is an independent stream family. The numeric values key
// the streams: never renumber or reuse them, or old runs stop being reproducible.
enum class RngPurpose : uint64_t {
  kInit = 1,     // parameter initialisation
  kShuffle = 2,  // the global sample order (sample_order.h)
  kShift = 3,    // per-epoch window alignment (dataset.h)
  kDropout = 4,  // dropout masks
  kSample = 5,   // sampling tokens at generation time
};

namespace rng_detail {

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd

RM_RNG_HD constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

RM_RNG_HD constexpr uint64_t absorb(uint64_t h, uint64_t x) {
  return mix64(h + x * kGamma);
}

}  // namespace rng_detail

// The state after absorbing (seed, purpose, a); rng_continue absorbs b from it. rng_u64 is the
// two together; called apart they make many draws that share (seed, purpose, a) (dropout: one
// sequence's elements) at the cost of one absorb each.
RM_RNG_HD constexpr uint64_t rng_prefix(uint64_t seed, RngPurpose purpose, uint64_t a) {
  using rng_detail::absorb;
  // The start constant only keeps the all-zero key away from state 0, which mix64 fixes.
  return absorb(absorb(absorb(0x6a09e667f3bcc909ULL, seed), static_cast<uint64_t>(purpose)), a);
}
RM_RNG_HD constexpr uint64_t rng_continue(uint64_t prefix, uint64_t b) {
  return rng_detail::absorb(prefix, b);
}

// 64 random bits.
RM_RNG_HD constexpr uint64_t rng_u64(uint64_t seed, RngPurpose purpose, uint64_t a, uint64_t b) {
  return rng_continue(rng_prefix(seed, purpose, a), b);
}

// Uniform in [0, 1) with 24 random bits: every value is an exact float, and 1.0f never occurs.
RM_RNG_HD constexpr float rng_uniform(uint64_t seed, RngPurpose purpose, uint64_t a, uint64_t b) {
  return static_cast<float>(rng_u64(seed, purpose, a, b) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller. The two uniforms are the high and low 32-bit halves of one
// draw, so the value is still a function of one counter; only the cosine branch is used (the
// sine branch would need a second counter to stay pure). u1 is in (0, 1], so log(u1) is
// finite and |z| <= sqrt(2 ln 2^32) ~ 6.66.
RM_RNG_HD inline float rng_normal(uint64_t seed, RngPurpose purpose, uint64_t a, uint64_t b) {
  const uint64_t bits = rng_u64(seed, purpose, a, b);
  const double u1 = static_cast<double>((bits >> 32) + 1) * (1.0 / 4294967296.0);
  const double u2 = static_cast<double>(bits & 0xffffffffULL) * (1.0 / 4294967296.0);
  return static_cast<float>(::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2));
}

}  // namespace rm

// rm::to_bf16 (kernels/bf16.h) against CUDA's own __float2bfloat16_rn, host-callable from
// cuda_bf16.h: the bits must match everywhere -- ties, denormals, signed zeros, infinities, NaNs,
// the overflow above the largest finite bf16 -- so bf16 data written by either backend is the
// same bytes. Compiled by the host compiler with the CUDA include directory.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/bf16.h"

namespace rm {
namespace {

uint16_t cuda_bits(float f) {
  const __nv_bfloat16 h = __float2bfloat16_rn(f);
  uint16_t u;
  static_assert(sizeof(h) == sizeof(u), "__nv_bfloat16 is two bytes");
  std::memcpy(&u, &h, sizeof(u));
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

::testing::AssertionResult same_bits(uint32_t u) {
  const float f = from_bits(u);
  const uint16_t ours = to_bf16(f).bits, theirs = cuda_bits(f);
  if (ours == theirs) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << std::hex << "float bits 0x" << u << ": rm 0x" << ours << ", cuda 0x" << theirs;
}

TEST(Bf16MatchesCuda, SpecialValues) {
  const uint32_t specials[] = {
      0x00000000u, 0x80000000u,               // +-0
      0x00000001u, 0x80000001u,               // smallest denormals
      0x00008000u, 0x00018000u, 0x00007FFFu,  // denormal ties (even, odd) and just below
      0x007FFFFFu, 0x807FFFFFu, 0x00800000u,  // largest denormal, smallest normal
      0x3F800000u, 0xBF800000u,               // +-1
      0x3F808000u, 0x3F818000u,               // ties to even: down, up
      0x3F808001u, 0x3F807FFFu,               // just above / below a tie
      0x7F7F0000u, 0x7F7F7FFFu,               // largest finite bf16, below its tie
      0x7F7F8000u, 0x7F7FFFFFu, 0xFF7FFFFFu,  // tie at max-finite (rounds to inf), FLT_MAX
      0x7F800000u, 0xFF800000u,               // +-inf
      0x7FC00000u, 0xFFC00000u, 0x7F800001u,  // quiet NaNs, signalling NaN
      0x7FBFFFFFu, 0xFFFFFFFFu, 0x7FFF8000u,  // NaN payloads
  };
  for (uint32_t u : specials) EXPECT_TRUE(same_bits(u));
}

// Every high half, with low halves around the rounding boundary (0x7FFF, 0x8000, 0x8001) and
// the extremes: all ties in every binade, both signs, denormals, infinities and NaNs.
TEST(Bf16MatchesCuda, EveryHighHalfAtTheRoundingBoundaries) {
  for (uint32_t hi = 0; hi <= 0xFFFFu; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      ASSERT_TRUE(same_bits(hi << 16 | lo));
    }
  }
}

TEST(Bf16MatchesCuda, SampledBitPatterns) {
  // A stride through all 2^32 patterns plus random ones.
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65537)
    ASSERT_TRUE(same_bits(static_cast<uint32_t>(u)));
  std::mt19937 gen(7);
  for (int i = 0; i < 1000000; ++i) ASSERT_TRUE(same_bits(gen()));
}

TEST(Bf16MatchesCuda, NaNIsCanonicalAndOverflowIsInfinite) {
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::quiet_NaN()).bits, 0x7FFFu);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7F80u);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::max()).bits, 0xFF80u);
}

}  // namespace
}  // namespace rm

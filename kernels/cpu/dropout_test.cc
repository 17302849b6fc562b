// Dropout's masks (kernels/dropout_mask.h) and the cpu kernel that applies them: the documented
// key, the probability and scale, and the invariances the model relies on (a micro-batch split
// draws what the whole batch draws; sites and sequences draw independently).
#include "kernels/cpu/dropout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/counter_rng.h"
#include "kernels/cpu/test_util.h"

namespace rm::cpu {
namespace {

using testing::random_floats;

DropoutKey key_for(double p, uint64_t seed, uint64_t first_sample, uint32_t site) {
  DropoutKey k = dropout_key(p);
  k.seed = seed;
  k.first_sample = first_sample;
  k.site = site;
  return k;
}

TEST(DropoutKey, QuantisesTheProbabilityAndKeepsTheExpectedValue) {
  const DropoutKey off = dropout_key(0.0);
  EXPECT_EQ(off.threshold, 0u);
  EXPECT_EQ(off.scale, 1.0f);
  const DropoutKey k = dropout_key(0.1);
  EXPECT_EQ(k.threshold, 6554u);  // round(0.1 * 65536)
  EXPECT_FLOAT_EQ(k.scale, static_cast<float>(65536.0 / (65536 - 6554)));
  // A probability next to 1 still keeps one value in 65536, with a finite scale.
  const DropoutKey most = dropout_key(0.9999999);
  EXPECT_EQ(most.threshold, 65535u);
  EXPECT_EQ(most.scale, 65536.0f);
}

// Every element against the formula the header documents, written out here independently: the
// key's words, four elements a draw, 16 bits each from the low end; rows that are not a multiple
// of four, and a row long enough for the kernel's threaded path.
TEST(DropoutKernel, EachElementIsDecidedByItsDocumentedDraw) {
  for (size_t row : {size_t{7}, size_t{1001}, size_t{70001}}) {
    const int B = 3;
    const DropoutKey key = key_for(0.3, 42, 1000, 5);
    const std::vector<float> x = random_floats(B * row, 1);
    std::vector<float> out(x.size(), testing::kNaN);
    dropout(out.data(), x.data(), key, B, row);
    for (int b = 0; b < B; ++b) {
      for (size_t e = 0; e < row; ++e) {
        const uint64_t draw =
            rng_u64(42, RngPurpose::kDropout, 1000 + b, (uint64_t{5} << 40) | (e / 4));
        const uint32_t bits = static_cast<uint32_t>(draw >> (16 * (e % 4))) & 0xffffu;
        const size_t i = b * row + e;
        const float want = x[i] * (bits >= key.threshold ? key.scale : 0.0f);
        ASSERT_EQ(out[i], want) << "row " << row << " sequence " << b << " element " << e;
      }
    }
  }
}

TEST(DropoutKernel, DropsAboutTheProbabilityAndScalesWhatItKeeps) {
  const size_t row = 200000;
  for (double p : {0.1, 0.5}) {
    const DropoutKey key = key_for(p, 7, 0, 0);
    const std::vector<float> x(row, 1.0f);
    std::vector<float> out(row);
    dropout(out.data(), x.data(), key, 1, row);
    size_t dropped = 0;
    double sum = 0;
    for (float v : out) {
      if (v == 0.0f) {
        ++dropped;
      } else {
        ASSERT_EQ(v, key.scale);
      }
      sum += v;
    }
    // 200000 draws: the share's standard deviation is under 0.0012.
    EXPECT_NEAR(static_cast<double>(dropped) / row, p, 0.006) << "p = " << p;
    EXPECT_NEAR(sum / row, 1.0, 0.012) << "inverted dropout keeps the mean, p = " << p;
  }
}

TEST(DropoutKernel, ProbabilityZeroIsTheIdentityAndInPlaceIsTheSame) {
  const size_t row = 1003;
  const std::vector<float> x = random_floats(2 * row, 2);
  std::vector<float> out(x.size());
  dropout(out.data(), x.data(), key_for(0.0, 1, 0, 0), 2, row);
  EXPECT_EQ(out, x);
  const DropoutKey key = key_for(0.2, 1, 0, 0);
  dropout(out.data(), x.data(), key, 2, row);
  std::vector<float> inplace = x;
  dropout(inplace.data(), inplace.data(), key, 2, row);
  EXPECT_EQ(inplace, out);
}

// What lets a sequence draw the same mask on any number of ranks: a batch of 4 from sample 10 is
// the batches of 2 from samples 10 and 12, end to end.
TEST(DropoutKernel, ABatchDrawsWhatItsSplitsDraw) {
  const size_t row = 999;
  const std::vector<float> x = random_floats(4 * row, 3);
  std::vector<float> whole(x.size()), split(x.size());
  dropout(whole.data(), x.data(), key_for(0.25, 9, 10, 3), 4, row);
  dropout(split.data(), x.data(), key_for(0.25, 9, 10, 3), 2, row);
  dropout(split.data() + 2 * row, x.data() + 2 * row, key_for(0.25, 9, 12, 3), 2, row);
  EXPECT_EQ(whole, split);
}

// Two masks that share a seed but not the sequence, the site or the seed agree about as often as
// independent ones would: p^2 + (1-p)^2 of the elements, 0.625 at p = 0.25.
TEST(DropoutKernel, SequencesSitesAndSeedsDrawIndependently) {
  const size_t row = 100000;
  const std::vector<float> ones(row, 1.0f);
  auto mask = [&](uint64_t seed, uint64_t sample, uint32_t site) {
    std::vector<float> out(row);
    dropout(out.data(), ones.data(), key_for(0.25, seed, sample, site), 1, row);
    return out;
  };
  const std::vector<float> base = mask(1, 0, 0);
  for (const std::vector<float>& other : {mask(1, 1, 0), mask(1, 0, 1), mask(2, 0, 0)}) {
    size_t same = 0;
    for (size_t i = 0; i < row; ++i) same += (base[i] == 0.0f) == (other[i] == 0.0f);
    EXPECT_NEAR(static_cast<double>(same) / row, 0.625, 0.01);
  }
}

// bf16: the scaled value rounded once, the zeros exact; the mask the float kernel's.
TEST(DropoutKernel, Bf16RoundsTheScaledValueOnceWithTheSameMask) {
  const size_t row = 4099;
  const std::vector<float> xf = random_floats(2 * row, 4);
  std::vector<bf16> x(xf.size());
  std::vector<float> widened(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) {
    x[i] = to_bf16(xf[i]);
    widened[i] = to_float(x[i]);
  }
  const DropoutKey key = key_for(0.15, 4, 77, 2);
  std::vector<bf16> out(x.size());
  std::vector<float> want(x.size());
  dropout(out.data(), x.data(), key, 2, row);
  dropout(want.data(), widened.data(), key, 2, row);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i].bits, to_bf16(want[i]).bits) << i;
}

}  // namespace
}  // namespace rm::cpu

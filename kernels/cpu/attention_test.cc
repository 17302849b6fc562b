#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/test_util.h"

namespace rm::cpu {
namespace {

using testing::all_close;
using testing::grad_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::to_double;

struct AttRef {
  std::vector<double> out, att;  // att[B,H,T,T], zero above the diagonal
};

// Plain causal multi-head attention over qkv[B,T,3C] (llm.c style loops).
AttRef attention_ref(const std::vector<double>& qkv, int B, int T, int C, int H) {
  const int hs = C / H, C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  AttRef r{std::vector<double>(static_cast<size_t>(B) * T * C, 0.0),
           std::vector<double>(static_cast<size_t>(B) * H * T * T, 0.0)};
  std::vector<double> s(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        const double* q = &qkv[(b * T + i) * C3 + h * hs];
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          const double* k = &qkv[(b * T + j) * C3 + C + h * hs];
          double d = 0.0;
          for (int c = 0; c < hs; ++c) d += q[c] * k[c];
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
        double* a = &r.att[((b * H + h) * T + i) * T];
        double* o = &r.out[(b * T + i) * C + h * hs];
        for (int j = 0; j <= i; ++j) {
          a[j] = s[j] / sum;
          const double* v = &qkv[(b * T + j) * C3 + 2 * C + h * hs];
          for (int c = 0; c < hs; ++c) o[c] += a[j] * v[c];
        }
      }
  return r;
}

// Larger-than-unit q/k so the softmax is far from uniform.
std::vector<float> make_qkv(int B, int T, int C, uint32_t seed) {
  return random_floats(static_cast<size_t>(B) * T * 3 * C, seed, -2.0f, 2.0f);
}

struct Shape {
  int B, T, C, H;
};

void check_forward(const Shape& s, uint32_t seed) {
  const auto qkv = make_qkv(s.B, s.T, s.C, seed);
  // NaN prefill: the kernel must not read anything it did not write.
  std::vector<float> out(static_cast<size_t>(s.B) * s.T * s.C, testing::kNaN);
  std::vector<float> att(static_cast<size_t>(s.B) * s.H * s.T * s.T, testing::kNaN);
  attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.H);
  const AttRef r = attention_ref(to_double(qkv), s.B, s.T, s.C, s.H);
  EXPECT_TRUE(all_close(out, r.out, 1e-4, 1e-6));
  // Only the causal part of att is specified.
  for (int bh = 0; bh < s.B * s.H; ++bh)
    for (int i = 0; i < s.T; ++i) {
      const size_t row = (static_cast<size_t>(bh) * s.T + i) * s.T;
      double total = 0.0;
      for (int j = 0; j <= i; ++j) {
        ASSERT_NEAR(att[row + j], r.att[row + j], 1e-4 * r.att[row + j] + 1e-7)
            << "bh " << bh << " i " << i << " j " << j;
        total += att[row + j];
      }
      ASSERT_NEAR(total, 1.0, 1e-5);
    }
}

TEST(Attention, ForwardMatchesReferenceSmall) {
  check_forward({2, 7, 12, 3}, 1);
}

// T spans three row blocks, the last one partial.
TEST(Attention, ForwardMatchesReferenceAcrossRowBlocks) {
  check_forward({2, 131, 32, 2}, 2);
}

// Changing token p's q, k and v leaves every output before p bit-identical.
TEST(Attention, IsCausal) {
  const int B = 2, T = 70, C = 12, H = 3, p = 40;
  auto qkv = make_qkv(B, T, C, 3);
  std::vector<float> out1(B * T * C), out2(B * T * C), att(B * H * T * T);
  attention_forward(out1.data(), att.data(), qkv.data(), B, T, C, H);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < 3 * C; ++c) qkv[(b * T + p) * 3 * C + c] += 1.5f;
  attention_forward(out2.data(), att.data(), qkv.data(), B, T, C, H);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const size_t row = static_cast<size_t>(b * T + t) * C;
      const std::vector<float> r1(out1.begin() + row, out1.begin() + row + C);
      const std::vector<float> r2(out2.begin() + row, out2.begin() + row + C);
      if (t < p) {
        EXPECT_EQ(r1, r2) << "b " << b << " t " << t;
      } else {
        EXPECT_NE(r1, r2) << "b " << b << " t " << t;
      }
    }
}

// Runs forward + backward (NaN-prefilled dqkv, att and scratch; scratch surrounded by guards)
// and returns dqkv for loss = sum(out * dout).
std::vector<float> run_backward(const Shape& s, const std::vector<float>& qkv,
                                const std::vector<float>& dout) {
  const size_t att_n = static_cast<size_t>(s.B) * s.H * s.T * s.T;
  std::vector<float> out(static_cast<size_t>(s.B) * s.T * s.C), att(att_n, testing::kNaN);
  attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.H);
  const size_t guard = 64;
  std::vector<float> scratch(att_n + 2 * guard, testing::kNaN);
  for (size_t i = 0; i < guard; ++i) scratch[i] = scratch[guard + att_n + i] = 7.0f;
  std::vector<float> dqkv(qkv.size(), testing::kNaN);
  attention_backward(dqkv.data(), scratch.data() + guard, dout.data(), qkv.data(), att.data(), s.B,
                     s.T, s.C, s.H);
  for (size_t i = 0; i < guard; ++i) {
    EXPECT_EQ(scratch[i], 7.0f);
    EXPECT_EQ(scratch[guard + att_n + i], 7.0f);
  }
  return dqkv;
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  const Shape s{2, 7, 12, 3};
  const auto qkv = make_qkv(s.B, s.T, s.C, 10);
  const auto dout = random_floats(static_cast<size_t>(s.B) * s.T * s.C, 11);
  const auto dqkv = run_backward(s, qkv, dout);
  auto x = to_double(qkv);
  const auto wd = to_double(dout);
  auto loss = [&] { return testing::dot(attention_ref(x, s.B, s.T, s.C, s.H).out, wd); };
  EXPECT_TRUE(grad_close(dqkv, numeric_grad(x, loss)));
  // OVERWRITE contract: a second call gives the same result, not twice of it.
  EXPECT_EQ(run_backward(s, qkv, dout), dqkv);
}

// Several row blocks (the dK/dV accumulation across blocks), a partial last block, parallel
// over (b, h); checked at sampled q, k and v entries of every part of the sequence.
TEST(Attention, BackwardAcrossRowBlocksSampled) {
  const Shape s{2, 131, 32, 2};
  const auto qkv = make_qkv(s.B, s.T, s.C, 20);
  const auto dout = random_floats(static_cast<size_t>(s.B) * s.T * s.C, 21);
  const auto dqkv = run_backward(s, qkv, dout);
  for (float g : dqkv) ASSERT_TRUE(std::isfinite(g));
  auto x = to_double(qkv);
  const auto wd = to_double(dout);
  auto loss = [&] { return testing::dot(attention_ref(x, s.B, s.T, s.C, s.H).out, wd); };
  const auto idx = testing::sample_indices(x.size(), 60, 22);
  const auto g = numeric_grad(x, loss, idx);
  EXPECT_TRUE(grad_close(testing::pick(dqkv, idx), testing::pick(g, idx)));
}

TEST(Attention, SingleTokenAndSingleHead) {
  check_forward({3, 1, 8, 1}, 30);
  const Shape s{1, 1, 8, 1};
  const auto qkv = make_qkv(1, 1, 8, 31);
  const auto dout = random_floats(8, 32);
  const auto dqkv = run_backward(s, qkv, dout);
  // One token attends only to itself: out = v, so dv = dout and dq = dk = 0.
  for (int c = 0; c < 8; ++c) {
    EXPECT_FLOAT_EQ(dqkv[c], 0.0f);
    EXPECT_FLOAT_EQ(dqkv[8 + c], 0.0f);
    EXPECT_FLOAT_EQ(dqkv[16 + c], dout[c]);
  }
}

TEST(Attention, RejectsHeadsNotDividingChannels) {
  std::vector<float> buf(1024);
  EXPECT_THROW(attention_forward(buf.data(), buf.data(), buf.data(), 1, 2, 10, 3),
               std::invalid_argument);
  EXPECT_THROW(
      attention_backward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), 1, 2, 10, 0),
      std::invalid_argument);
}

}  // namespace
}  // namespace rm::cpu

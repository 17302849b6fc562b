#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>

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

// out[N,OC] = inp[N,C] W[OC,C]^T + b (b may be empty).
std::vector<double> linear_ref(const std::vector<double>& inp, const std::vector<double>& w,
                               const std::vector<double>& b, int N, int C, int OC) {
  std::vector<double> out(static_cast<size_t>(N) * OC);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int c = 0; c < C; ++c) s += inp[n * C + c] * w[o * C + c];
      out[n * OC + o] = s;
    }
  }
  return out;
}

TEST(Sgemm, MatchesDoubleReferenceForAllTransposes) {
  const int M = 7, N = 5, K = 9;
  const float alpha = 0.7f, beta = -1.3f;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Padded leading dimensions: the wrapper must honour strides, not assume packing.
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 4;
      const auto A = random_floats(static_cast<size_t>(ta ? K : M) * lda, 1);
      const auto B = random_floats(static_cast<size_t>(tb ? N : K) * ldb, 2);
      auto Cm = random_floats(static_cast<size_t>(M) * ldc, 3);
      std::vector<double> want(Cm.begin(), Cm.end());
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          double s = 0.0;
          for (int k = 0; k < K; ++k) {
            const double a = ta ? A[k * lda + i] : A[i * lda + k];
            const double b = tb ? B[j * ldb + k] : B[k * ldb + j];
            s += a * b;
          }
          want[i * ldc + j] = alpha * s + beta * static_cast<double>(Cm[i * ldc + j]);
        }
      }
      sgemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, Cm.data(), ldc);
      EXPECT_TRUE(all_close(Cm, want, 1e-5, 1e-5)) << "ta=" << ta << " tb=" << tb;
    }
  }
}

TEST(Sgemm, BetaZeroOverwritesNaN) {
  const int M = 3, N = 4, K = 2;
  const auto A = random_floats(M * K, 4), B = random_floats(K * N, 5);
  std::vector<float> C(M * N, testing::kNaN);
  sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
  for (float c : C) EXPECT_TRUE(std::isfinite(c));
}

TEST(Sgemm, ZeroKScalesC) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
}

TEST(Sgemm, RejectsBadArguments) {
  std::vector<float> A(64), B(64), C(64);
  EXPECT_THROW(sgemm(false, false, -1, 2, 2, 1, A.data(), 2, B.data(), 2, 0, C.data(), 2),
               std::invalid_argument);
  EXPECT_THROW(sgemm(false, false, 2, 2, 3, 1, A.data(), 2, B.data(), 2, 0, C.data(), 2),
               std::invalid_argument);  // lda < K
  EXPECT_THROW(sgemm(false, true, 2, 3, 2, 1, A.data(), 2, B.data(), 1, 0, C.data(), 3),
               std::invalid_argument);  // B^T stored [N,K]: ldb < K
  EXPECT_THROW(sgemm(false, false, 2, 3, 2, 1, A.data(), 2, B.data(), 3, 0, C.data(), 2),
               std::invalid_argument);  // ldc < N
  EXPECT_THROW(sgemm(false, false, 2, 2, 2, 1, nullptr, 2, B.data(), 2, 0, C.data(), 2),
               std::invalid_argument);
  EXPECT_NO_THROW(sgemm(false, false, 0, 2, 2, 1, nullptr, 2, nullptr, 2, 0, nullptr, 2));
}

class LinearTest : public ::testing::TestWithParam<bool> {};  // param: with bias

TEST_P(LinearTest, ForwardMatchesReference) {
  const bool with_bias = GetParam();
  const int N = 13, C = 12, OC = 10;
  const auto inp = random_floats(N * C, 10), w = random_floats(OC * C, 11);
  const auto b = with_bias ? random_floats(OC, 12) : std::vector<float>{};
  std::vector<float> out(N * OC, testing::kNaN);
  linear_forward(out.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
  const auto want = linear_ref(to_double(inp), to_double(w), to_double(b), N, C, OC);
  EXPECT_TRUE(all_close(out, want, 1e-5, 1e-6));
}

TEST_P(LinearTest, BackwardMatchesFiniteDifferences) {
  const bool with_bias = GetParam();
  const int N = 13, C = 12, OC = 10;
  const auto inp = random_floats(N * C, 20), w = random_floats(OC * C, 21);
  const auto b = with_bias ? random_floats(OC, 22) : std::vector<float>{};
  const auto dout = random_floats(N * OC, 23);  // loss = sum(out * dout)

  std::vector<float> dinp(N * C, testing::kNaN), dw(OC * C, 0.0f), db(OC, 0.0f);
  linear_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), inp.data(),
                  w.data(), N, C, OC);

  auto xi = to_double(inp), xw = to_double(w), xb = to_double(b);
  const auto wd = to_double(dout);
  auto loss = [&] { return testing::dot(linear_ref(xi, xw, xb, N, C, OC), wd); };
  EXPECT_TRUE(grad_close(dinp, numeric_grad(xi, loss))) << "dinp";
  EXPECT_TRUE(grad_close(dw, numeric_grad(xw, loss))) << "dweight";
  if (with_bias) {
    EXPECT_TRUE(grad_close(db, numeric_grad(xb, loss))) << "dbias";
  }
}

INSTANTIATE_TEST_SUITE_P(Bias, LinearTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithBias" : "NoBias"; });

// Parameter gradients accumulate (+=) across calls, the input gradient is overwritten (=).
TEST(Linear, BackwardAccumulatesParamsAndOverwritesInput) {
  const int N = 9, C = 12, OC = 7;
  const auto inp = random_floats(N * C, 30), w = random_floats(OC * C, 31);
  const auto dout = random_floats(N * OC, 32);
  std::vector<float> dinp1(N * C), dw1(OC * C, 0.0f), db1(OC, 0.0f);
  linear_backward(dinp1.data(), dw1.data(), db1.data(), dout.data(), inp.data(), w.data(), N, C,
                  OC);

  const auto dw0 = random_floats(OC * C, 33), db0 = random_floats(OC, 34);
  std::vector<float> dinp(N * C, 123.0f), dw = dw0, db = db0;
  for (int rep = 0; rep < 2; ++rep) {
    linear_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  }
  std::vector<double> want_w(dw.size()), want_b(db.size());
  for (size_t i = 0; i < dw.size(); ++i) want_w[i] = dw0[i] + 2.0 * dw1[i];
  for (size_t i = 0; i < db.size(); ++i) want_b[i] = db0[i] + 2.0 * db1[i];
  EXPECT_TRUE(all_close(dw, want_w, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(db, want_b, 1e-6, 1e-6));
  EXPECT_EQ(dinp, dinp1);
}

TEST(Linear, BackwardWithoutDinpOrDbias) {
  const int N = 5, C = 4, OC = 3;
  const auto inp = random_floats(N * C, 40), w = random_floats(OC * C, 41);
  const auto dout = random_floats(N * OC, 42);
  std::vector<float> dw(OC * C, 0.0f), dw_ref(OC * C, 0.0f), dinp(N * C), db(OC, 0.0f);
  linear_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  linear_backward(dinp.data(), dw_ref.data(), db.data(), dout.data(), inp.data(), w.data(), N, C,
                  OC);
  EXPECT_EQ(dw, dw_ref);
}

// Large enough for the parallel bias reduction (several column blocks, several threads).
TEST(Linear, LargeBiasGradientMatchesReference) {
  const int N = 300, C = 8, OC = 517;
  const auto inp = random_floats(N * C, 50), w = random_floats(OC * C, 51);
  const auto dout = random_floats(N * OC, 52);
  std::vector<float> dw(OC * C, 0.0f), db(OC, 1.0f);
  linear_backward(nullptr, dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  std::vector<double> want(OC, 1.0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) want[o] += dout[n * OC + o];
  // Float accumulation over 300 rows: ~1e-5 absolute on sums of size ~10.
  EXPECT_TRUE(all_close(db, want, 1e-5, 1e-4));
}

}  // namespace
}  // namespace rm::cpu

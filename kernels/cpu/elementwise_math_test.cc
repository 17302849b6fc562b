// The shared __host__ __device__ math, tested on the CPU (the CUDA kernels compile the same code).
#include "kernels/elementwise_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace rm {
namespace {

TEST(FastExp, WithinThreeUlpOverTheNormalRange) {
  double worst = 0.0;
  float worst_x = 0.0f;
  for (float x = -87.3f; x < 88.37f; x += 0.000731f) {
    const double want = std::exp(static_cast<double>(x));
    const double rel = std::fabs(fast_expf(x) - want) / want;
    if (rel > worst) worst = rel, worst_x = x;
  }
  EXPECT_LT(worst, 3 * 5.97e-8) << "at x = " << worst_x;
  EXPECT_EQ(fast_expf(0.0f), 1.0f);
}

TEST(FastExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_expf(-inf), 0.0f);
  EXPECT_EQ(fast_expf(-100.0f), 0.0f);
  EXPECT_EQ(fast_expf(inf), inf);
  EXPECT_EQ(fast_expf(89.0f), inf);
  EXPECT_TRUE(std::isfinite(fast_expf(88.37f)));  // overflow at 88.376, slightly before expf
  EXPECT_EQ(fast_expf(88.5f), inf);
  EXPECT_GT(fast_expf(-87.5f), 0.0f);  // gradual underflow down to about -87.7
  EXPECT_TRUE(std::isnan(fast_expf(std::numeric_limits<float>::quiet_NaN())));
}

// PyTorch's formula, in double: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
double gelu_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
double gelu_grad_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  const double th = std::tanh(u);
  const double du = std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

TEST(Gelu, ValueAndDerivativeMatchTanhFormula) {
  for (float x = -5.0f; x <= 5.0f; x += 0.00123f) {
    const double g = gelu_ref(x), d = gelu_grad_ref(x);
    // A few float ulps where the value is O(1); the far tails are covered below.
    ASSERT_NEAR(gelu_tanh(x), g, 2e-6 * std::fabs(g) + 1e-7) << "x = " << x;
    ASSERT_NEAR(gelu_tanh_grad(x), d, 2e-6 * std::fabs(d) + 2e-7) << "x = " << x;
  }
}

TEST(Gelu, TailsAreFiniteAndExact) {
  for (float x : {10.0f, 30.0f, 1e4f, 1e30f}) {
    EXPECT_FLOAT_EQ(gelu_tanh(x), x);
    EXPECT_FLOAT_EQ(gelu_tanh_grad(x), 1.0f);
  }
  for (float x : {-10.0f, -30.0f, -1e4f, -1e30f}) {
    EXPECT_NEAR(gelu_tanh(x), 0.0f, 1e-30f);
    EXPECT_NEAR(gelu_tanh_grad(x), 0.0f, 1e-30f);
    EXPECT_TRUE(std::isfinite(gelu_tanh_grad(x)));
  }
  EXPECT_EQ(gelu_tanh(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(gelu_tanh_grad(0.0f), 0.5f);
}

}  // namespace
}  // namespace rm

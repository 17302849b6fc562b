#include "kernels/cpu/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/test_util.h"

namespace rm::cpu {
namespace {

using testing::all_close;
using testing::random_floats;

double gelu_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

TEST(GeluKernel, ForwardMatchesReferenceAndAllowsAliasing) {
  for (int N : {1001, 100003}) {  // serial and parallel paths, N not a multiple of the vector
    const auto x = random_floats(N, 1, -6.0f, 6.0f);
    std::vector<double> want(N);
    for (int i = 0; i < N; ++i) want[i] = gelu_ref(x[i]);
    std::vector<float> out(N, testing::kNaN);
    gelu_forward(out.data(), x.data(), N);
    EXPECT_TRUE(all_close(out, want, 2e-6, 1e-7)) << "N = " << N;
    std::vector<float> inplace = x;
    gelu_forward(inplace.data(), inplace.data(), N);
    EXPECT_EQ(inplace, out);
  }
}

// dinp = gelu'(x) * dout, against central differences of the double reference.
TEST(GeluKernel, BackwardMatchesFiniteDifferencesAndOverwrites) {
  for (int N : {1001, 100003}) {
    const auto x = random_floats(N, 2, -6.0f, 6.0f);
    const auto dout = random_floats(N, 3);
    std::vector<double> want(N);
    const double h = 1e-6;
    for (int i = 0; i < N; ++i) {
      want[i] = (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h) * dout[i];
    }
    std::vector<float> dinp(N, testing::kNaN);
    gelu_backward(dinp.data(), x.data(), dout.data(), N);
    EXPECT_TRUE(all_close(dinp, want, 1e-5, 1e-6)) << "N = " << N;
    std::vector<float> inplace = dout;  // dinp may alias dout
    gelu_backward(inplace.data(), x.data(), inplace.data(), N);
    EXPECT_EQ(inplace, dinp);
  }
}

}  // namespace
}  // namespace rm::cpu

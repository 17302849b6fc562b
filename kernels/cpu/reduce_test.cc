// reduce.h, residual.h and threads.h.
#include "kernels/cpu/reduce.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "kernels/cpu/residual.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threads.h"

namespace rm::cpu {
namespace {

using testing::random_floats;

TEST(SumSquares, MatchesDoubleLoop) {
  for (size_t n : {size_t{0}, size_t{7}, size_t{1000003}}) {
    const auto x = random_floats(n, 1, -3.0f, 3.0f);
    double want = 0.0;
    for (float v : x) want += static_cast<double>(v) * v;
    EXPECT_NEAR(sum_squares(x.data(), n), want, 1e-12 * want) << "n " << n;
  }
}

TEST(Scale, MultipliesEveryElement) {
  for (size_t n : {size_t{5}, size_t{100003}}) {
    auto x = random_floats(n, 2);
    const auto x0 = x;
    scale(x.data(), n, 0.5f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], x0[i] * 0.5f);
  }
}

TEST(Residual, AddAndAddInplaceWithAliasing) {
  for (size_t n : {size_t{13}, size_t{100003}}) {
    const auto a = random_floats(n, 3), b = random_floats(n, 4);
    std::vector<float> out(n, testing::kNaN);
    add(out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
    std::vector<float> alias = a;  // out == a
    add(alias.data(), alias.data(), b.data(), n);
    EXPECT_EQ(alias, out);
    std::vector<float> acc = a;
    add_inplace(acc.data(), b.data(), n);
    EXPECT_EQ(acc, out);
    // From bf16: each source widened exactly, then added in float.
    std::vector<bf16> b16(n);
    for (size_t i = 0; i < n; ++i) b16[i] = to_bf16(b[i]);
    std::vector<float> acc16 = a;
    add_inplace(acc16.data(), b16.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc16[i], a[i] + to_float(b16[i])) << i;
  }
}

TEST(Threads, SetNumThreadsControlsOpenMP) {
  const int saved = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  set_num_threads(0);  // clamped
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(saved);
}

}  // namespace
}  // namespace rm::cpu

// reduce.h, residual.h and threads.h.
#include "kernels/cpu/reduce.h"

#include <cblas.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
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

// The same bits for any thread count: identical runs log identical gradient norms (an OpenMP
// reduction added the threads' sums in the order they finished).
TEST(SumSquares, TheSameBitsForAnyThreadCount) {
  const auto x = random_floats(3000017, 2, -3.0f, 3.0f);
  const int saved = num_threads();
  std::vector<double> sums;
  for (int threads : {1, 2, 3, 4, 1, 3}) {
    set_num_threads(threads);
    sums.push_back(sum_squares(x.data(), x.size()));
  }
  set_num_threads(saved);
  for (double s : sums) EXPECT_EQ(s, sums[0]);
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

// OMP_THREAD_LIMIT is read once, at start-up: the test runs itself again in a child process
// with a limit of 2 (RM_TEST_THREAD_LIMIT_CHILD marks the child), where OpenBLAS must not be
// told more threads than OpenMP will give.
TEST(Threads, OmpThreadLimitCapsTheBlasThreadsToo) {
  if (std::getenv("RM_TEST_THREAD_LIMIT_CHILD") != nullptr) {
    ASSERT_EQ(omp_get_thread_limit(), 2);
    EXPECT_EQ(set_num_threads(3), 2);
    EXPECT_EQ(num_threads(), 2);
    EXPECT_EQ(openblas_get_num_threads(), 2);
    EXPECT_EQ(set_num_threads(1), 1);
    EXPECT_EQ(openblas_get_num_threads(), 1);
    return;
  }
  const std::string cmd = "RM_TEST_THREAD_LIMIT_CHILD=1 OMP_THREAD_LIMIT=2 /proc/" +
                          std::to_string(::getpid()) +
                          "/exe --gtest_filter=Threads.OmpThreadLimitCapsTheBlasThreadsToo 2>&1";
  std::FILE* child = ::popen(cmd.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, child)) out.append(buf, n);
  EXPECT_EQ(::pclose(child), 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

}  // namespace
}  // namespace rm::cpu

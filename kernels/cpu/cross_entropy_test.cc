#include "kernels/cpu/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threads.h"

namespace rm::cpu {
namespace {

using testing::all_close;
using testing::grad_close;
using testing::numeric_grad;
using testing::random_floats;
using testing::to_double;

// Per-row losses (0 for ignored rows), stable log-sum-exp in double.
std::vector<double> ce_ref(const std::vector<double>& logits, const std::vector<int>& targets,
                           int N, int V) {
  std::vector<double> loss(N, 0.0);
  for (int n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    const double* x = &logits[static_cast<size_t>(n) * V];
    double mx = x[0], sum = 0.0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, x[j]);
    for (int j = 0; j < V; ++j) sum += std::exp(x[j] - mx);
    loss[n] = std::log(sum) + mx - x[targets[n]];
  }
  return loss;
}

double sum(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s;
}

const std::vector<int> kTargets = {3, -1, 0, 36, 17, -100, 5, 5, 20};  // N = 9, V = 37

TEST(CrossEntropy, ForwardMatchesReferenceAndIgnoresNegativeTargets) {
  const int N = 9, V = 37;
  const auto logits = random_floats(N * V, 1, -4.0f, 4.0f);
  std::vector<float> losses(N, testing::kNaN);
  const double total = cross_entropy_forward(losses.data(), logits.data(), kTargets.data(), N, V);
  const auto want = ce_ref(to_double(logits), kTargets, N, V);
  EXPECT_TRUE(all_close(losses, want, 1e-5, 1e-6));
  EXPECT_EQ(losses[1], 0.0f);
  EXPECT_EQ(losses[5], 0.0f);
  EXPECT_NEAR(total, sum(want), 1e-5 * sum(want));
  EXPECT_DOUBLE_EQ(cross_entropy_forward(nullptr, logits.data(), kTargets.data(), N, V), total);
}

TEST(CrossEntropy, ForwardBackwardMatchesFiniteDifferences) {
  const int N = 9, V = 37;
  const float grad_scale = 0.25f;
  const auto logits = random_floats(N * V, 2, -4.0f, 4.0f);
  const double fwd = cross_entropy_forward(nullptr, logits.data(), kTargets.data(), N, V);
  std::vector<float> d = logits;
  const double total = cross_entropy_forward_backward(d.data(), kTargets.data(), N, V, grad_scale);
  EXPECT_NEAR(total, fwd, 1e-6 * fwd);

  auto x = to_double(logits);
  auto loss = [&] { return grad_scale * sum(ce_ref(x, kTargets, N, V)); };
  EXPECT_TRUE(grad_close(d, numeric_grad(x, loss)));
  for (int n : {1, 5})  // ignored rows: exactly zero gradient
    for (int j = 0; j < V; ++j) ASSERT_EQ(d[n * V + j], 0.0f);
}

// The loss sum has the same bits for any thread count (rows summed in order after the parallel
// loop; an OpenMP reduction added the threads' sums in the order they finished).
TEST(CrossEntropy, TheSameLossBitsForAnyThreadCount) {
  const int N = 997, V = 301;
  const auto logits = testing::random_floats(static_cast<size_t>(N) * V, 3, -4.0f, 4.0f);
  std::vector<int> targets(N);
  for (int n = 0; n < N; ++n) targets[n] = (n * 37) % V;
  const int saved = num_threads();
  std::vector<double> forward, both;
  for (int threads : {1, 2, 3, 4, 3}) {
    set_num_threads(threads);
    forward.push_back(cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V));
    std::vector<float> scratch = logits;
    both.push_back(cross_entropy_forward_backward(scratch.data(), targets.data(), N, V, 1.0f / N));
  }
  set_num_threads(saved);
  for (size_t i = 0; i < forward.size(); ++i) {
    EXPECT_EQ(forward[i], forward[0]) << i;
    EXPECT_EQ(both[i], both[0]) << i;
  }
}

TEST(CrossEntropy, StableForHugeLogits) {
  const int N = 9, V = 37;
  auto logits = random_floats(N * V, 3, -1000.0f, 1000.0f);
  const auto want = ce_ref(to_double(logits), kTargets, N, V);
  std::vector<float> losses(N);
  cross_entropy_forward(losses.data(), logits.data(), kTargets.data(), N, V);
  EXPECT_TRUE(all_close(losses, want, 1e-5, 1e-4));
  cross_entropy_forward_backward(logits.data(), kTargets.data(), N, V, 1.0f);
  for (float g : logits) ASSERT_TRUE(std::isfinite(g));
}

TEST(CrossEntropy, RejectsTargetOutOfRangeBeforeWriting) {
  const int N = 3, V = 5;
  auto logits = random_floats(N * V, 4);
  const auto before = logits;
  const std::vector<int> targets = {0, 5, 1};
  EXPECT_THROW(cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V),
               std::out_of_range);
  EXPECT_THROW(cross_entropy_forward_backward(logits.data(), targets.data(), N, V, 1.0f),
               std::out_of_range);
  EXPECT_EQ(logits, before);
}

// GPT-2 vocabulary: parallel over rows, long rows; softmax checked at sampled entries.
TEST(CrossEntropy, Gpt2VocabMatchesReference) {
  const int N = 6, V = 50257;
  const auto logits = random_floats(static_cast<size_t>(N) * V, 5, -8.0f, 8.0f);
  const std::vector<int> targets = {0, 50256, 1234, -1, 777, 31337};
  const auto x = to_double(logits);
  const auto want = ce_ref(x, targets, N, V);
  std::vector<float> losses(N);
  const double total = cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
  EXPECT_TRUE(all_close(losses, want, 1e-5, 0));
  EXPECT_NEAR(total, sum(want), 1e-6 * sum(want));

  std::vector<float> d = logits;
  const float grad_scale = 1.0f / 5;
  EXPECT_NEAR(cross_entropy_forward_backward(d.data(), targets.data(), N, V, grad_scale), total,
              1e-6 * total);
  const auto idx = testing::sample_indices(d.size(), 500, 6);
  std::vector<double> want_d;
  for (size_t i : idx) {
    const int n = static_cast<int>(i / V), j = static_cast<int>(i % V);
    if (targets[n] < 0) {
      want_d.push_back(0.0);
      continue;
    }
    // softmax_j = exp(x_j - logsumexp) with logsumexp = loss + x_target.
    const double lse = want[n] + x[static_cast<size_t>(n) * V + targets[n]];
    want_d.push_back(grad_scale * (std::exp(x[i] - lse) - (j == targets[n] ? 1.0 : 0.0)));
  }
  EXPECT_TRUE(all_close(testing::pick(d, idx), want_d, 1e-5, 1e-12));
  for (int n = 0; n < N; ++n) {  // each counted row's gradient sums to zero
    double s = 0.0;
    for (int j = 0; j < V; ++j) s += d[static_cast<size_t>(n) * V + j];
    EXPECT_NEAR(s, 0.0, 1e-6);
  }
}

}  // namespace
}  // namespace rm::cpu

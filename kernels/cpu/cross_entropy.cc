#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/parallel_util.h"
#include "kernels/elementwise_math.h"
#include "kernels/row_math.h"

namespace rm::cpu {
namespace {

// The exp sums run in float (vectorised) over chunks, and the chunk sums add up in double: one
// float sum over V=50257 terms drifts by ~1e-5 relative, which would show in every gradient.
constexpr int kSumChunk = 1024;

// Checked up front, on the calling thread: an exception cannot leave an OpenMP region.
void check_targets(const int* targets, int N, int V) {
  for (int n = 0; n < N; ++n) {
    if (targets[n] >= V) {
      throw std::out_of_range("rm::cpu::cross_entropy: target " + std::to_string(targets[n]) +
                              " of row " + std::to_string(n) +
                              " is not below V=" + std::to_string(V));
    }
  }
}

}  // namespace

// The rows' losses are summed in row order on one thread, after the parallel loop: an OpenMP
// reduction adds the threads' partial sums in the order they finish, and with 3 or more threads
// two identical runs logged losses that differed in the last bits (docs/reliability.md promises
// the same bits on the same ranks and threads; this gives them for any thread count).
double sum_in_order(const std::vector<double>& row_loss) {
  double total = 0.0;
  for (double loss : row_loss) total += loss;
  return total;
}

double cross_entropy_forward(float* losses, const float* logits, const int* targets, int N, int V) {
  check_targets(targets, N, V);
  std::vector<double> row_loss(static_cast<size_t>(std::max(N, 0)), 0.0);
  const bool parallel = static_cast<size_t>(N) * V >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int n = 0; n < N; ++n) {
    const int t = targets[n];
    if (t < 0) {
      if (losses != nullptr) losses[n] = 0.0f;
      continue;
    }
    const float* __restrict x = logits + detail::row_offset(n, V);
    const float mx = detail::max_of(x, V);
    double sum = 0.0;
    for (int j0 = 0; j0 < V; j0 += kSumChunk) {
      const int j1 = std::min(V, j0 + kSumChunk);
      float part = 0.0f;
#pragma omp simd reduction(+ : part)
      for (int j = j0; j < j1; ++j) part += fast_expf(x[j] - mx);
      sum += part;
    }
    // loss = logsumexp(x) - x[t]; the max is subtracted for range, added back here.
    const double loss = cross_entropy_row_loss(sum, mx, x[t]);
    if (losses != nullptr) losses[n] = static_cast<float>(loss);
    row_loss[static_cast<size_t>(n)] = loss;
  }
  return sum_in_order(row_loss);
}

double cross_entropy_forward_backward(float* logits_then_dlogits, const int* targets, int N, int V,
                                      float grad_scale) {
  check_targets(targets, N, V);
  std::vector<double> row_loss(static_cast<size_t>(std::max(N, 0)), 0.0);
  const bool parallel = static_cast<size_t>(N) * V >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int n = 0; n < N; ++n) {
    float* __restrict x = logits_then_dlogits + detail::row_offset(n, V);
    const int t = targets[n];
    if (t < 0) {
      std::memset(x, 0, sizeof(float) * V);
      continue;
    }
    // Three passes over a row that fits in L2 (V=50257 is 200 KB): max, exp + sum (storing the
    // exps in place), scale.
    const float mx = detail::max_of(x, V);
    const float xt = x[t];
    double sum = 0.0;
    for (int j0 = 0; j0 < V; j0 += kSumChunk) {
      const int j1 = std::min(V, j0 + kSumChunk);
      float part = 0.0f;
#pragma omp simd reduction(+ : part)
      for (int j = j0; j < j1; ++j) {
        const float e = fast_expf(x[j] - mx);
        x[j] = e;
        part += e;
      }
      sum += part;
    }
    row_loss[static_cast<size_t>(n)] = cross_entropy_row_loss(sum, mx, xt);
    const float f = cross_entropy_grad_factor(grad_scale, sum);
#pragma omp simd
    for (int j = 0; j < V; ++j) x[j] *= f;
    x[t] -= grad_scale;
  }
  return sum_in_order(row_loss);
}

}  // namespace rm::cpu

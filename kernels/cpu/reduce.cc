#include "kernels/cpu/reduce.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {

// Fixed blocks, each summed by one thread, then the blocks' sums added in order on one thread:
// the same bits for any thread count. An OpenMP reduction adds the threads' partial sums in
// the order they finish, and with 3 or more threads the gradient norm of two identical runs
// differed in the last bits (and with it, rarely, the clip factor and a spike decision).
double sum_squares(const float* x, size_t n) {
  constexpr size_t kBlock = size_t{1} << 15;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t b = 0; b < blocks; ++b) {
    const size_t end = std::min(n, (b + 1) * kBlock);
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (size_t i = b * kBlock; i < end; ++i) {
      const double v = x[i];
      acc += v * v;
    }
    partial[b] = acc;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

void scale(float* x, size_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace rm::cpu

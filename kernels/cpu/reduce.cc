#include "kernels/cpu/reduce.h"

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {

double sum_squares(const float* x, size_t n) {
  double acc = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : acc) \
    if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    acc += v * v;
  }
  return acc;
}

void scale(float* x, size_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace rm::cpu

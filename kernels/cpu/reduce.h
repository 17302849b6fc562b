// Whole-buffer reductions and scaling (global gradient norm, gradient averaging).
// Threading: OpenMP over elements (small n runs inline); sum_squares over fixed blocks added in
// order, so its bits do not depend on the thread count.
#pragma once

#include <cstddef>

namespace rm::cpu {

// sum_i x[i]^2, accumulated in double (the global grad norm sums ~1e8 squares).
double sum_squares(const float* x, size_t n);

// x *= s.
void scale(float* x, size_t n, float s);

}  // namespace rm::cpu

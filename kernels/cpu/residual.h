// Residual-stream element-wise ops. Threading: OpenMP over elements (small n runs inline).
#pragma once

#include <cstddef>

#include "kernels/bf16.h"

namespace rm::cpu {

// out = a + b. out may alias a or b exactly (not partially).
void add(float* out, const float* a, const float* b, size_t n);

// acc += x, x widened exactly to float (T = float or bf16: the bf16 form folds gradients
// reduced in bf16 into fp32 ones). x must not overlap acc (exact aliasing is fine for float).
template <typename T>
void add_inplace(float* acc, const T* x, size_t n);

}  // namespace rm::cpu

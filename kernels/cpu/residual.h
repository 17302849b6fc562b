// Residual-stream element-wise ops. Threading: OpenMP over elements (small n runs inline).
#pragma once

#include <cstddef>

namespace rm::cpu {

// out = a + b. out may alias a or b exactly (not partially).
void add(float* out, const float* a, const float* b, size_t n);

// acc += x. x must not partially overlap acc.
void add_inplace(float* acc, const float* x, size_t n);

}  // namespace rm::cpu

// float <-> bf16 over whole buffers, with the conversions of kernels/bf16.h (round to nearest
// even; widening is exact). Threading: OpenMP over elements (small n runs inline).
#pragma once

#include <cstddef>

#include "kernels/bf16.h"

namespace rm::cpu {

void cast(bf16* dst, const float* src, size_t n);
void cast(float* dst, const bf16* src, size_t n);

}  // namespace rm::cpu

#include "kernels/cpu/cast.h"

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {

void cast(bf16* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void cast(float* dst, const bf16* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

}  // namespace rm::cpu

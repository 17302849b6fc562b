#include "kernels/cpu/residual.h"

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {

void add(float* out, const float* a, const float* b, size_t n) {
  // omp simd: exact aliasing (out == a) has no loop-carried dependence, so vectorising is safe.
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void add_inplace(float* acc, const T* x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) acc[i] += load(x[i]);
}

template void add_inplace<float>(float*, const float*, size_t);
template void add_inplace<bf16>(float*, const bf16*, size_t);

}  // namespace rm::cpu

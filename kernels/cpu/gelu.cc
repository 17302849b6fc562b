#include "kernels/cpu/gelu.h"

#include <cstddef>

#include "kernels/cpu/parallel_util.h"
#include "kernels/elementwise_math.h"

namespace rm::cpu {

// size_t, as the other element-wise kernels: an int made an activation of 2^31 elements
// (MLP width 32768 x 65536 rows) skip the GELU, silently.
void gelu_forward(float* out, const float* inp, size_t N) {
  const bool parallel = N >= detail::kMinParallelElems;
#pragma omp parallel for simd schedule(static) if (parallel)
  for (size_t i = 0; i < N; ++i) out[i] = gelu_tanh(inp[i]);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
  const bool parallel = N >= detail::kMinParallelElems;
#pragma omp parallel for simd schedule(static) if (parallel)
  for (size_t i = 0; i < N; ++i) dinp[i] = gelu_tanh_grad(inp[i]) * dout[i];
}

}  // namespace rm::cpu

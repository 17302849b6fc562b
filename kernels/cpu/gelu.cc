#include "kernels/cpu/gelu.h"

#include <cstddef>

#include "kernels/cpu/parallel_util.h"
#include "kernels/elementwise_math.h"

namespace rm::cpu {

void gelu_forward(float* out, const float* inp, int N) {
  const bool parallel = static_cast<size_t>(N) >= detail::kMinParallelElems;
#pragma omp parallel for simd schedule(static) if (parallel)
  for (int i = 0; i < N; ++i) out[i] = gelu_tanh(inp[i]);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int N) {
  const bool parallel = static_cast<size_t>(N) >= detail::kMinParallelElems;
#pragma omp parallel for simd schedule(static) if (parallel)
  for (int i = 0; i < N; ++i) dinp[i] = gelu_tanh_grad(inp[i]) * dout[i];
}

}  // namespace rm::cpu

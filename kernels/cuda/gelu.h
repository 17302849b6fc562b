// GELU (tanh approximation) on the GPU: the contract of kernels/cpu/gelu.h, computed with the
// shared formulas of kernels/elementwise_math.h.
//
// Pointers are device pointers. Launches are asynchronous on `stream`; a launch error throws
// std::runtime_error (errors inside the kernel surface at the next synchronising call).
#pragma once

#include <cuda_runtime_api.h>

namespace rm::cuda {

// out = gelu(inp); out may alias inp.
void gelu_forward(float* out, const float* inp, int N, cudaStream_t stream);

// dinp = gelu'(inp) * dout, OVERWRITTEN; dinp may alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, int N, cudaStream_t stream);

}  // namespace rm::cuda

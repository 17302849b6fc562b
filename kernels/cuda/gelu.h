// GELU (tanh approximation) on the GPU: the contract of kernels/cpu/gelu.h for T = float or bf16,
// computed in float with gelu_tanh / gelu_tanh_grad (kernels/elementwise_math.h).
// Device pointers; asynchronous on `stream`; a launch error throws std::runtime_error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace rm::cuda {

// out = gelu(inp); out may alias inp.
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream);

// dinp = gelu'(inp) * dout, OVERWRITTEN; dinp may alias dout.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream);

}  // namespace rm::cuda

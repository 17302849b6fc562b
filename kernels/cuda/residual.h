// Residual-stream element-wise ops on the GPU (kernels/cpu/residual.h). T = float or bf16: read
// in float, one rounding per output. Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace rm::cuda {

// out = a + b; out may alias a or b exactly.
template <typename T>
void add(T* out, const T* a, const T* b, size_t n, cudaStream_t stream);

// acc += x, x widened to float (T = float or bf16, as cpu::add_inplace).
template <typename T>
void add_inplace(float* acc, const T* x, size_t n, cudaStream_t stream);

}  // namespace rm::cuda

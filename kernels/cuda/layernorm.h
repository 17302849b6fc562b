// LayerNorm on the GPU (kernels/cpu/layernorm.h: eps 1e-5, mean/rstd saved, dinp ADDED,
// dweight/dbias ACCUMULATED), T = float or bf16, with the per-row formulas of
// kernels/row_math.h. One block per row for the forward and the input gradient; the parameter
// gradients are column sums over rows in row order, one thread per column (deterministic).
// Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace rm::cuda {

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C, cudaStream_t stream);

template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                        const T* weight, const float* mean, const float* rstd, int N, int C,
                        cudaStream_t stream);

}  // namespace rm::cuda

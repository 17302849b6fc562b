// LayerNorm on the GPU (kernels/cpu/layernorm.h: eps 1e-5, mean/rstd saved, dinp ADDED,
// dweight/dbias ACCUMULATED), T = float or bf16, with the per-row formulas of
// kernels/row_math.h. One block per row for the forward, one warp per row for the input
// gradient; the parameter gradients are column sums in a fixed order (column_sums.cuh:
// deterministic), with `partials` device scratch of column_sum_shape(N, C, 2).partial_floats.
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
                        float* partials, cudaStream_t stream);

}  // namespace rm::cuda

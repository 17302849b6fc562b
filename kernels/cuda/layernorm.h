// LayerNorm on the GPU (kernels/cpu/layernorm.h: eps 1e-5, mean/rstd saved, dinp ADDED,
// dweight/dbias ACCUMULATED), T = float or bf16, with the per-row formulas of
// kernels/row_math.h. Where C is a whole number of 16-byte vectors a lane (row_vectors_per_lane
// in launch_util.h: C = 256, 512, ..., 2048 for bf16, 768 included) and the pointers are
// 16-byte aligned, a warp keeps a row in registers: the forward reads it once, and the backward
// is one pass that also sums the weight and bias gradients per warp. Otherwise a block per row
// forward, a warp per row for the input gradient and column sums for the parameters'. Either
// way the parameter gradients are added in a fixed order (deterministic); `partials` is device
// scratch of layernorm_backward_partial_floats(N, C) floats.
// Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace rm::cuda {

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C, cudaStream_t stream);

// sum = a + b (rounded to T, as add()), then out = layernorm(sum): one pass a row where the
// rows kernel applies (a and b read once, no second launch), else add() and layernorm_forward;
// the same bits either way. sum may alias a or b.
template <typename T>
void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a, const T* b,
                                const T* weight, const T* bias, int N, int C, cudaStream_t stream);

template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                        const T* weight, const float* mean, const float* rstd, int N, int C,
                        float* partials, cudaStream_t stream);

}  // namespace rm::cuda

// The Linear layer on the GPU (kernels/cpu/gemm.h: W[OC,C], out[N,OC] = inp W^T + bias,
// dinp OVERWRITTEN, dweight and dbias ACCUMULATED), T = float or bf16.
//
// The GEMMs are cuBLAS calls built by gemm_args.h (linear_*_gemm) and run by cublas_gemm.h: T
// inputs, T output for activations, fp32 output for the weight gradient, fp32 accumulation.
// The bias is copied into every row of out first and the GEMM adds onto it (beta = 1), so a
// bf16 output is rounded once; dbias is a per-column sum over rows in a fixed order
// (column_sums.cuh: deterministic; `partials` is device scratch of
// column_sum_shape(N, OC, 1).partial_floats floats, unused without dbias). Asynchronous on the
// handle's stream, which must be `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/cublas_gemm.h"

namespace rm::cuda {

template <typename T>
void linear_forward(const Blas& blas, T* out, const T* inp, const T* weight, const T* bias, int N,
                    int C, int OC, cudaStream_t stream);

template <typename T>
void linear_backward(const Blas& blas, T* dinp, float* dweight, float* dbias, const T* dout,
                     const T* inp, const T* weight, int N, int C, int OC, float* partials,
                     cudaStream_t stream);

}  // namespace rm::cuda

// The Linear layer on the GPU (kernels/cpu/gemm.h: W[OC,C], out[N,OC] = inp W^T + bias,
// dinp OVERWRITTEN, dweight and dbias ACCUMULATED), T = float or bf16, and its two fused forms
// for the MLP (layer_kernels.h: linear_gelu_forward, linear_backward_into_gelu).
//
// bf16 with `lt` given: cuBLASLt matmuls with the epilogues of lt_gemm_args.h -- the bias added
// in the forward GEMM, GELU applied there with the pre-activation kept, GELU's derivative applied
// in the input-gradient GEMM, the bias gradient reduced by the weight-gradient GEMM (into
// `scratch`, then added to dbias). Where cuBLASLt has no algorithm for a call (lt_gemm.h), and
// for fp32: cuBLAS GEMMs built by gemm_args.h, the bias copied into every row of out first with
// the GEMM adding onto it (beta = 1, so a bf16 output is rounded once), GELU and its backward as
// their own kernels, and dbias a per-column sum over rows in a fixed order (column_sums.cuh).
// Both paths are deterministic. `scratch` is device memory of linear_scratch_floats(N, OC)
// floats, unused without dbias. Asynchronous on the handle's stream, which must be `stream`.
//
// The backwards take an optional SideStream: bf16's 16-byte bias gradient (bias_gradient.h),
// memory-bound, then runs on it beside the compute-bound input- and weight-gradient GEMMs (it
// only reads dout; they write dinp and dweight), forked from `stream` once dout is ready and
// joined back into `stream` before the call returns -- so to every later call on `stream` it is
// as if all ran there, with the same bits. Null, or another path: all on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/lt_gemm.h"

namespace rm::cuda {

size_t linear_scratch_floats(int N, int OC);

struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;  // cudaEventDisableTiming; reused call after call
};

template <typename T>
void linear_forward(const Blas& blas, LtGemm* lt, T* out, const T* inp, const T* weight,
                    const T* bias, int N, int C, int OC, cudaStream_t stream);

template <typename T>
void linear_backward(const Blas& blas, LtGemm* lt, T* dinp, float* dweight, float* dbias,
                     const T* dout, const T* inp, const T* weight, int N, int C, int OC,
                     float* scratch, cudaStream_t stream, const SideStream* side = nullptr);

// pre = inp W^T + bias, out = gelu(pre).
template <typename T>
void linear_gelu_forward(const Blas& blas, LtGemm* lt, T* out, T* pre, const T* inp,
                         const T* weight, const T* bias, int N, int C, int OC, cudaStream_t stream);

// dpre = gelu'(pre) * (dout W); dweight, dbias as linear_backward.
template <typename T>
void linear_backward_into_gelu(const Blas& blas, LtGemm* lt, T* dpre, float* dweight, float* dbias,
                               const T* dout, const T* inp, const T* weight, const T* pre, int N,
                               int C, int OC, float* scratch, cudaStream_t stream,
                               const SideStream* side = nullptr);

}  // namespace rm::cuda

// Causal multi-head self-attention core on the GPU (kernels/cpu/attention.h: qkv[B,Tn,3C] with
// the heads side by side, att[B,H,Tn,Tn], out[B,Tn,C], scale 1/sqrt(C/H)), T = float or bf16.
//
// The scores and values are strided-batched cuBLAS GEMMs reading Q, K, V in place from qkv (row
// stride 3C, head stride hs: no permuting copies; gemm_args.h's AttentionPlan builds and
// documents each call), and one block per score row runs the causal softmax (forward) or its
// backward (kernels/row_math.h). For T = float all B x H pairs go at once: min(B, H) calls a
// GEMM (one per batch entry over its heads, or one per head over the entries) and one softmax
// launch over every row; for T = bf16, whose float scores need a scratch, one batch entry at a
// time (B calls a GEMM and B softmax launches: the path of head sizes the flash kernels do not
// take).
//
// Scores and their gradients are formed in float: for T = float directly in att / datt_scratch
// (the softmax kernels then work in place), for T = bf16 in `scores` scratch of H*Tn*Tn floats,
// so the only bf16 roundings are of the outputs (att, out, the dpre fed to the dQ/dK GEMMs,
// dqkv). att is written in full: rows hold 0 for j > i, and the backward relies on that (its
// dV GEMM reads whole rows of att), so att must come from this backend's forward.
// Shapes: throws std::invalid_argument unless B, Tn >= 0 and H > 0 divides C.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/cublas_gemm.h"

namespace rm::cuda {

template <typename T>
void attention_forward(const Blas& blas, T* out, T* att, const T* qkv, int B, int Tn, int C, int H,
                       float* scores, cudaStream_t stream);

// dqkv OVERWRITTEN; datt_scratch has the size of att.
template <typename T>
void attention_backward(const Blas& blas, T* dqkv, T* datt_scratch, const T* dout, const T* qkv,
                        const T* att, int B, int Tn, int C, int H, float* scores,
                        cudaStream_t stream);

// The float scratch (in floats) a call needs: 0 for T = float, H*Tn*Tn for bf16.
template <typename T>
size_t attention_scratch_floats(int Tn, int H);

}  // namespace rm::cuda

// Matrix multiply (checked BLAS wrapper) and the Linear layer.
//
// All matrices are float32, row-major. Weights use the PyTorch nn.Linear layout W[OC, C].
// Threading: the BLAS threads itself when called outside a parallel region and runs
// single-threaded inside one (OpenBLAS OpenMP build), so these are safe to call from an
// OpenMP worker thread. Nothing here allocates.
#pragma once

namespace rm::cpu {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major (cblas_sgemm). op(X) is X or
// X^T; A is stored [M,K] (trans_a = false) or [K,M] (true), likewise B is [K,N] or [N,K].
// Leading dimensions are row strides in elements, so sub-matrices of wider buffers work.
// Throws std::invalid_argument on negative sizes, too-small leading dimensions or null pointers.
// With beta == 0, C is not read (NaN/garbage in C is overwritten).
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

// out[N,OC] = inp[N,C] W^T + bias. bias may be null. out must not alias inp or weight.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);

// Gradients of linear_forward given dout[N,OC]:
//   dinp[N,C]    = dout W          OVERWRITTEN; skipped when dinp is null (first layer)
//   dweight[OC,C] += dout^T inp    ACCUMULATED
//   dbias[OC]     += sum_n dout    ACCUMULATED; skipped when dbias is null
// dinp must not alias dout, inp or weight.
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

}  // namespace rm::cpu

// cuBLAS arguments for row-major GEMMs, built in plain host code (no CUDA headers) so that every
// call the backend makes is checked on machines without a GPU (gemm_args_test.cc evaluates the
// arguments with a column-major reference GEMM and compares with cpu::sgemm).
//
// cuBLAS is column-major. A row-major X[r, c] with row stride ld is, byte for byte, the
// column-major X^T[c, r] with leading dimension ld. So the row-major
//   C[M,N] = alpha op(A) op(B) + beta C
// is computed as the column-major C^T = op(B)^T op(A)^T: the operands swap places (cuBLAS's A is
// our B), m = N, n = M, each op keeps its own transpose flag, and the leading dimensions are the
// row strides. Strided batches: batch entry i uses A + i*stride_a, B + i*stride_b, C + i*stride_c.
#pragma once

#include <cstddef>

namespace rm::cuda {

// A row-major request, as cpu::sgemm takes it (plus batch strides, in elements).
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  float alpha = 1.0f, beta = 0.0f;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;
};

enum class GemmOp { kNoTrans, kTrans };  // CUBLAS_OP_N, CUBLAS_OP_T

// The arguments of cublasGemmEx / cublasGemmStridedBatchedEx, in their order.
struct CublasGemmArgs {
  // Always true: cuBLAS's first operand is the row-major B, its second the row-major A.
  bool operands_swapped = true;
  GemmOp op_a = GemmOp::kNoTrans, op_b = GemmOp::kNoTrans;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;

  bool empty() const { return m == 0 || n == 0 || batch == 0; }  // nothing to compute
};

// Checks the request as cpu::sgemm does (sizes >= 0, each leading dimension at least its stored
// row length, batch >= 0, strides >= 0) and throws std::invalid_argument naming the bad value.
CublasGemmArgs to_cublas(const RowMajorGemm& g);

// ---- The calls the layers make --------------------------------------------------------------
// Linear (kernels/cpu/gemm.h): inp[N,C], W[OC,C], out/dout[N,OC].
RowMajorGemm linear_forward_gemm(int N, int C, int OC, bool has_bias);  // out = inp W^T (+ out)
RowMajorGemm linear_dinp_gemm(int N, int C, int OC);                    // dinp = dout W
RowMajorGemm linear_dweight_gemm(int N, int C, int OC);                 // dweight += dout^T inp

// The classifier over the padded vocabulary Vp (classifier_plan.h): logits = inp wte_p^T is
// linear_forward_gemm(N, C, Vp, false); dinp = dlogits wte_p is linear_dinp_gemm(N, C, Vp). The
// weight gradient takes the first V columns of dlogits:
RowMajorGemm classifier_dweight_gemm(int N, int C, int V, int Vp);  // dwte[V,C] += dlogits^T inp
// The same in two GEMMs over rows of dwte: [0, split) with split the largest multiple of 128 not
// above V, then [split, V) (its A starts at dlogits column `split`, its C at dwte row `split`;
// tail.M = 0 when V is a multiple of 128). cuBLAS runs 50257 rows at 0.5x the rate of 50304 (an
// H200, bench/cuda_linear_bench): the odd row count, not the work, is slow.
struct SplitGemm {
  RowMajorGemm head, tail;
  int split = 0;
};
SplitGemm classifier_dweight_gemms(int N, int C, int V, int Vp);

// Attention (kernels/cpu/attention.h), one call per batch entry b, batched over the H heads.
// Operands start at the offsets of attention_offsets(b, ...): Q = qkv + qkv, K = Q + C,
// V = Q + 2C (likewise dQ, dK, dV in dqkv), the [H,Tn,Tn] scores/att/datt at att, out/dout at out.
struct AttentionOffsets {
  size_t qkv = 0, att = 0, out = 0;
};
AttentionOffsets attention_offsets(int b, int Tn, int C, int H);
float attention_scale(int C, int H);                        // 1/sqrt(C/H)
RowMajorGemm attention_scores_gemm(int Tn, int C, int H);   // scores = scale Q K^T
RowMajorGemm attention_values_gemm(int Tn, int C, int H);   // out = att V
RowMajorGemm attention_dvalues_gemm(int Tn, int C, int H);  // dV = att^T dout
RowMajorGemm attention_datt_gemm(int Tn, int C, int H);     // datt = dout V^T
RowMajorGemm attention_dq_gemm(int Tn, int C, int H);       // dQ = scale dpre K
RowMajorGemm attention_dk_gemm(int Tn, int C, int H);       // dK = scale dpre^T Q

}  // namespace rm::cuda

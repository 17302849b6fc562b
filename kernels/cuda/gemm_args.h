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

// Attention (kernels/cpu/attention.h) materialised: each GEMM is a strided batch over the
// (b, h) pairs of one group. cuBLAS batches take one stride, and the pairs' operands are not
// evenly spaced across both b and h, so the B x H pairs go as `calls` groups: one per batch entry
// b over its H heads (kByEntry), or one per head h over the B entries (kByHead), whichever makes
// fewer calls -- min(B, H) per GEMM instead of B. kByHead needs the whole [B,H,Tn,Tn] of scores
// addressable at once, so only when they are formed in att (float), not in a one-entry scratch.
// Call g's operands start at offsets(g): Q = qkv + qkv, K = Q + C, V = Q + 2C (likewise dQ, dK,
// dV in dqkv), its scores/att/datt at att, out/dout at out.
struct AttentionOffsets {
  size_t qkv = 0, att = 0, out = 0;
};
enum class AttentionGrouping { kByEntry, kByHead };
struct AttentionPlan {
  AttentionGrouping grouping = AttentionGrouping::kByEntry;
  int B = 0, Tn = 0, C = 0, H = 0;
  int calls = 0;  // groups: B (by entry) or H (by head)
  int batch = 0;  // pairs a call: H or B
  // Element strides between a call's consecutive pairs, in qkv, att and out.
  long long qkv_stride = 0, att_stride = 0, out_stride = 0;
  AttentionOffsets offsets(int g) const;
};
// scores_in_att: the scores are formed in att itself (T = float), which kByHead needs.
AttentionPlan attention_plan(int B, int Tn, int C, int H, bool scores_in_att);
float attention_scale(int C, int H);                        // 1/sqrt(C/H)
RowMajorGemm attention_scores_gemm(const AttentionPlan&);   // scores = scale Q K^T
RowMajorGemm attention_values_gemm(const AttentionPlan&);   // out = att V
RowMajorGemm attention_dvalues_gemm(const AttentionPlan&);  // dV = att^T dout
RowMajorGemm attention_datt_gemm(const AttentionPlan&);     // datt = dout V^T
RowMajorGemm attention_dq_gemm(const AttentionPlan&);       // dQ = scale dpre K
RowMajorGemm attention_dk_gemm(const AttentionPlan&);       // dK = scale dpre^T Q

}  // namespace rm::cuda

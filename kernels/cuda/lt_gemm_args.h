// cuBLASLt matmuls with fused epilogues for the Linear layer, described in plain host code (no
// CUDA headers) so that each call's arguments are checked on machines without a GPU
// (lt_gemm_args_test.cc evaluates them with cuBLASLt's documented semantics and compares with
// the cpu backend's linear, GELU and bias-gradient kernels).
//
// The GEMM part is gemm_args.h's column-major form (cuBLAS's first operand is the row-major B).
// The epilogues, as cublasLt.h documents them, with D the column-major m x n result:
//   kNone        D = alpha op(A) op(B) + beta C
//   kBias        D = that + bias[row]                      (bias: m elements, D's type)
//   kGeluAuxBias aux = that + bias[row]; D = gelu(aux)     (aux: m x n, ld aux_ld, D's type)
//   kDGelu       D = gelu'(aux) * (alpha op(A) op(B) + beta C)
//   kBGradB      D as kNone; bias[col] = sum over k of op(B)[k, col] (n elements, D's type),
//                written, not added
// In the Linear's row-major terms (W[OC, C], rows N): the forward's bias is OC long and the
// pre-activation is the [N, OC] output itself; the weight-gradient GEMM's op(B) is dout, so its
// bias gradient is dout's column sums over the N rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gemm_args.h"

namespace rm::cuda {

enum class LtEpilogue { kNone, kBias, kGeluAuxBias, kDGelu, kBGradB };
const char* epilogue_name(LtEpilogue e);

struct LtGemmArgs {
  CublasGemmArgs gemm;  // batch 1
  LtEpilogue epilogue = LtEpilogue::kNone;
  int vector_length = 0;  // the bias (m) or the bias gradient (n); 0 without one
  int64_t aux_ld = 0;     // the pre-activation's leading dimension (kGeluAuxBias, kDGelu)
};

// out[N,OC] = inp[N,C] W^T + bias; with gelu, pre = that and out = gelu(pre), both [N,OC].
LtGemmArgs lt_linear_forward(int N, int C, int OC, bool bias, bool gelu);
// dinp[N,C] = dout[N,OC] W; with dgelu, dinp = gelu'(pre) * that, pre [N,C] (the forward's).
LtGemmArgs lt_linear_dinp(int N, int C, int OC, bool dgelu);
// dweight[OC,C] += dout^T inp (fp32); with dbias, the epilogue writes sum_n dout[n, :].
LtGemmArgs lt_linear_dweight(int N, int C, int OC, bool dbias);

// The three matrix layouts cublasLtMatrixLayoutCreate is given (column-major, as stored): A is
// op_a's operand, k x m stored when transposed, else m x k; B likewise k x n or n x k; D m x n.
// lt_gemm.cc makes its layouts from these; the host test reads every operand through them.
struct LtLayout {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
struct LtLayouts {
  LtLayout a, b, d;
};
LtLayouts lt_layouts(const CublasGemmArgs& g);

// cuBLASLt's documented requirements beyond the GEMM's: the auxiliary matrix's leading dimension
// a multiple of 8 and at least m; vectors and aux 16-byte aligned (alignment_of below). A call
// that fails them takes the unfused path.
bool lt_epilogue_shape_ok(const LtGemmArgs& a);

// The largest power of two, at most 256, that divides the address (256 for null): what
// cublasLtMatmulAlgoGetHeuristic's MIN_ALIGNMENT preferences take, since its default assumes 256.
int alignment_of(const void* p);

}  // namespace rm::cuda

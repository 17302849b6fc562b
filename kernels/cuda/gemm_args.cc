#include "kernels/cuda/gemm_args.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace rm::cuda {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("rm::cuda gemm: " + what);
}

void check_ld(const char* name, int ld, int row_length) {
  if (ld < std::max(1, row_length)) {
    fail(std::string(name) + "=" + std::to_string(ld) + " is smaller than the row length " +
         std::to_string(row_length));
  }
}

GemmOp op(bool trans) {
  return trans ? GemmOp::kTrans : GemmOp::kNoTrans;
}

}  // namespace

CublasGemmArgs to_cublas(const RowMajorGemm& g) {
  if (g.M < 0 || g.N < 0 || g.K < 0 || g.batch < 0) {
    fail("negative size M=" + std::to_string(g.M) + " N=" + std::to_string(g.N) +
         " K=" + std::to_string(g.K) + " batch=" + std::to_string(g.batch));
  }
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0) fail("negative batch stride");
  // Row lengths of the stored (untransposed) matrices, as cpu::sgemm checks them.
  check_ld("lda", g.lda, g.trans_a ? g.M : g.K);
  check_ld("ldb", g.ldb, g.trans_b ? g.K : g.N);
  check_ld("ldc", g.ldc, g.N);
  CublasGemmArgs c;
  c.operands_swapped = true;
  c.op_a = op(g.trans_b);
  c.op_b = op(g.trans_a);
  c.m = g.N;
  c.n = g.M;
  c.k = g.K;
  c.alpha = g.alpha;
  c.beta = g.beta;
  c.lda = g.ldb;
  c.ldb = g.lda;
  c.ldc = g.ldc;
  c.stride_a = g.stride_b;
  c.stride_b = g.stride_a;
  c.stride_c = g.stride_c;
  c.batch = g.batch;
  return c;
}

RowMajorGemm linear_forward_gemm(int N, int C, int OC, bool has_bias) {
  RowMajorGemm g;
  g.trans_b = true;
  g.M = N, g.N = OC, g.K = C;
  g.lda = C, g.ldb = C, g.ldc = OC;
  g.beta = has_bias ? 1.0f : 0.0f;  // out is seeded with the bias rows first
  return g;
}

RowMajorGemm linear_dinp_gemm(int N, int C, int OC) {
  RowMajorGemm g;
  g.M = N, g.N = C, g.K = OC;
  g.lda = OC, g.ldb = C, g.ldc = C;
  return g;
}

RowMajorGemm linear_dweight_gemm(int N, int C, int OC) {
  RowMajorGemm g;
  g.trans_a = true;
  g.M = OC, g.N = C, g.K = N;
  g.lda = OC, g.ldb = C, g.ldc = C;
  g.beta = 1.0f;  // accumulate
  return g;
}

RowMajorGemm classifier_dweight_gemm(int N, int C, int V, int Vp) {
  RowMajorGemm g = linear_dweight_gemm(N, C, V);
  g.lda = Vp;  // dlogits' row stride; its first V columns are the vocabulary's
  return g;
}

SplitGemm classifier_dweight_gemms(int N, int C, int V, int Vp) {
  SplitGemm s;
  s.split = V / 128 * 128;
  s.head = classifier_dweight_gemm(N, C, s.split, Vp);
  s.tail = classifier_dweight_gemm(N, C, V - s.split, Vp);
  return s;
}

AttentionOffsets attention_offsets(int b, int Tn, int C, int H) {
  AttentionOffsets o;
  o.qkv = static_cast<size_t>(b) * Tn * 3 * C;
  o.att = static_cast<size_t>(b) * H * Tn * Tn;
  o.out = static_cast<size_t>(b) * Tn * C;
  return o;
}

float attention_scale(int C, int H) {
  return 1.0f / std::sqrt(static_cast<float>(C / H));
}

// Per head h: Q_h, K_h, V_h are Tn x hs with row stride 3C, h*hs columns in; the scores of head
// h are the Tn x Tn block h*Tn*Tn in; out_h/dout_h are Tn x hs with row stride C, h*hs in.
RowMajorGemm attention_scores_gemm(int Tn, int C, int H) {
  const int hs = C / H;
  RowMajorGemm g;
  g.trans_b = true;
  g.M = Tn, g.N = Tn, g.K = hs;
  g.alpha = attention_scale(C, H);
  g.lda = 3 * C, g.ldb = 3 * C, g.ldc = Tn;
  g.stride_a = hs, g.stride_b = hs, g.stride_c = static_cast<long long>(Tn) * Tn;
  g.batch = H;
  return g;
}

RowMajorGemm attention_values_gemm(int Tn, int C, int H) {
  const int hs = C / H;
  RowMajorGemm g;
  g.M = Tn, g.N = hs, g.K = Tn;
  g.lda = Tn, g.ldb = 3 * C, g.ldc = C;
  g.stride_a = static_cast<long long>(Tn) * Tn, g.stride_b = hs, g.stride_c = hs;
  g.batch = H;
  return g;
}

RowMajorGemm attention_dvalues_gemm(int Tn, int C, int H) {
  const int hs = C / H;
  RowMajorGemm g;
  g.trans_a = true;
  g.M = Tn, g.N = hs, g.K = Tn;
  g.lda = Tn, g.ldb = C, g.ldc = 3 * C;
  g.stride_a = static_cast<long long>(Tn) * Tn, g.stride_b = hs, g.stride_c = hs;
  g.batch = H;
  return g;
}

RowMajorGemm attention_datt_gemm(int Tn, int C, int H) {
  const int hs = C / H;
  RowMajorGemm g;
  g.trans_b = true;
  g.M = Tn, g.N = Tn, g.K = hs;
  g.lda = C, g.ldb = 3 * C, g.ldc = Tn;
  g.stride_a = hs, g.stride_b = hs, g.stride_c = static_cast<long long>(Tn) * Tn;
  g.batch = H;
  return g;
}

RowMajorGemm attention_dq_gemm(int Tn, int C, int H) {
  const int hs = C / H;
  RowMajorGemm g;
  g.M = Tn, g.N = hs, g.K = Tn;
  g.alpha = attention_scale(C, H);
  g.lda = Tn, g.ldb = 3 * C, g.ldc = 3 * C;
  g.stride_a = static_cast<long long>(Tn) * Tn, g.stride_b = hs, g.stride_c = hs;
  g.batch = H;
  return g;
}

RowMajorGemm attention_dk_gemm(int Tn, int C, int H) {
  const int hs = C / H;
  RowMajorGemm g;
  g.trans_a = true;
  g.M = Tn, g.N = hs, g.K = Tn;
  g.alpha = attention_scale(C, H);
  g.lda = Tn, g.ldb = 3 * C, g.ldc = 3 * C;
  g.stride_a = static_cast<long long>(Tn) * Tn, g.stride_b = hs, g.stride_c = hs;
  g.batch = H;
  return g;
}

}  // namespace rm::cuda

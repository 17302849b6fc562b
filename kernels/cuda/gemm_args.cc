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

AttentionPlan attention_plan(int B, int Tn, int C, int H, bool scores_in_att) {
  AttentionPlan p;
  p.B = B, p.Tn = Tn, p.C = C, p.H = H;
  const int hs = H > 0 ? C / H : 0;
  const long long TT = static_cast<long long>(Tn) * Tn;
  if (scores_in_att && H < B) {
    p.grouping = AttentionGrouping::kByHead;
    p.calls = H, p.batch = B;
    p.qkv_stride = static_cast<long long>(Tn) * 3 * C;
    p.att_stride = H * TT;
    p.out_stride = static_cast<long long>(Tn) * C;
  } else {
    p.calls = B, p.batch = H;
    p.qkv_stride = hs, p.att_stride = TT, p.out_stride = hs;
  }
  return p;
}

AttentionOffsets AttentionPlan::offsets(int g) const {
  AttentionOffsets o;
  const size_t TT = static_cast<size_t>(Tn) * Tn;
  if (grouping == AttentionGrouping::kByHead) {  // head g of every entry
    const size_t hs = static_cast<size_t>(C / H);
    o.qkv = g * hs;
    o.att = g * TT;
    o.out = g * hs;
  } else {  // every head of entry g
    o.qkv = static_cast<size_t>(g) * Tn * 3 * C;
    o.att = static_cast<size_t>(g) * H * TT;
    o.out = static_cast<size_t>(g) * Tn * C;
  }
  return o;
}

float attention_scale(int C, int H) {
  return 1.0f / std::sqrt(static_cast<float>(C / H));
}

namespace {

// A call of the plan: its pair count and the strides of its qkv-, att- and out-shaped operands
// (a is the request's A, b its B, c its C).
enum class Operand { kQkv, kAtt, kOut };
RowMajorGemm attention_gemm(const AttentionPlan& p, Operand a, Operand b, Operand c) {
  auto stride = [&](Operand x) {
    return x == Operand::kQkv ? p.qkv_stride : x == Operand::kAtt ? p.att_stride : p.out_stride;
  };
  auto ld = [&](Operand x) {
    return x == Operand::kQkv ? 3 * p.C : x == Operand::kAtt ? p.Tn : p.C;
  };
  RowMajorGemm g;
  g.lda = ld(a), g.ldb = ld(b), g.ldc = ld(c);
  g.stride_a = stride(a), g.stride_b = stride(b), g.stride_c = stride(c);
  g.batch = p.batch;
  return g;
}

}  // namespace

// Per pair (b, h): Q_h, K_h, V_h are Tn x hs with row stride 3C, h*hs columns in; the scores of
// the pair are a Tn x Tn block; out_h/dout_h are Tn x hs with row stride C, h*hs in.
RowMajorGemm attention_scores_gemm(const AttentionPlan& p) {
  RowMajorGemm g = attention_gemm(p, Operand::kQkv, Operand::kQkv, Operand::kAtt);
  g.trans_b = true;
  g.M = p.Tn, g.N = p.Tn, g.K = p.C / p.H;
  g.alpha = attention_scale(p.C, p.H);
  return g;
}

RowMajorGemm attention_values_gemm(const AttentionPlan& p) {
  RowMajorGemm g = attention_gemm(p, Operand::kAtt, Operand::kQkv, Operand::kOut);
  g.M = p.Tn, g.N = p.C / p.H, g.K = p.Tn;
  return g;
}

RowMajorGemm attention_dvalues_gemm(const AttentionPlan& p) {
  RowMajorGemm g = attention_gemm(p, Operand::kAtt, Operand::kOut, Operand::kQkv);
  g.trans_a = true;
  g.M = p.Tn, g.N = p.C / p.H, g.K = p.Tn;
  return g;
}

RowMajorGemm attention_datt_gemm(const AttentionPlan& p) {
  RowMajorGemm g = attention_gemm(p, Operand::kOut, Operand::kQkv, Operand::kAtt);
  g.trans_b = true;
  g.M = p.Tn, g.N = p.Tn, g.K = p.C / p.H;
  return g;
}

RowMajorGemm attention_dq_gemm(const AttentionPlan& p) {
  RowMajorGemm g = attention_gemm(p, Operand::kAtt, Operand::kQkv, Operand::kQkv);
  g.M = p.Tn, g.N = p.C / p.H, g.K = p.Tn;
  g.alpha = attention_scale(p.C, p.H);
  return g;
}

RowMajorGemm attention_dk_gemm(const AttentionPlan& p) {
  RowMajorGemm g = attention_gemm(p, Operand::kAtt, Operand::kQkv, Operand::kQkv);
  g.trans_a = true;
  g.M = p.Tn, g.N = p.C / p.H, g.K = p.Tn;
  g.alpha = attention_scale(p.C, p.H);
  return g;
}

}  // namespace rm::cuda

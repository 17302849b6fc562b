#include "kernels/cuda/lt_gemm_args.h"

namespace rm::cuda {

const char* epilogue_name(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kNone:
      return "none";
    case LtEpilogue::kBias:
      return "bias";
    case LtEpilogue::kGeluAuxBias:
      return "gelu_aux_bias";
    case LtEpilogue::kDGelu:
      return "dgelu";
    case LtEpilogue::kBGradB:
      return "bgradb";
  }
  return "?";
}

LtGemmArgs lt_linear_forward(int N, int C, int OC, bool bias, bool gelu) {
  LtGemmArgs a;
  // beta = 0: the bias comes from the epilogue, not from seeded rows.
  a.gemm = to_cublas(linear_forward_gemm(N, C, OC, false));
  if (gelu) {
    a.epilogue = LtEpilogue::kGeluAuxBias;
    a.aux_ld = a.gemm.ldc;  // pre has out's shape and layout
  } else if (bias) {
    a.epilogue = LtEpilogue::kBias;
  }
  // GELU without a bias is GELU_AUX_BIAS over a zero bias: the caller passes one only where it
  // has one, so a gelu linear must have a bias (the GPT's fc does).
  a.vector_length = bias || gelu ? a.gemm.m : 0;
  return a;
}

LtGemmArgs lt_linear_dinp(int N, int C, int OC, bool dgelu) {
  LtGemmArgs a;
  a.gemm = to_cublas(linear_dinp_gemm(N, C, OC));
  if (dgelu) {
    a.epilogue = LtEpilogue::kDGelu;
    a.aux_ld = a.gemm.ldc;  // pre [N, C] has dinp's shape and layout
  }
  return a;
}

LtGemmArgs lt_linear_dweight(int N, int C, int OC, bool dbias) {
  LtGemmArgs a;
  a.gemm = to_cublas(linear_dweight_gemm(N, C, OC));
  if (dbias) {
    a.epilogue = LtEpilogue::kBGradB;
    a.vector_length = a.gemm.n;  // OC
  }
  return a;
}

LtLayouts lt_layouts(const CublasGemmArgs& g) {
  const bool ta = g.op_a == GemmOp::kTrans, tb = g.op_b == GemmOp::kTrans;
  const auto u = [](int x) { return static_cast<uint64_t>(x); };
  LtLayouts l;
  l.a = {u(ta ? g.k : g.m), u(ta ? g.m : g.k), g.lda};
  l.b = {u(tb ? g.n : g.k), u(tb ? g.k : g.n), g.ldb};
  l.d = {u(g.m), u(g.n), g.ldc};
  return l;
}

bool lt_epilogue_shape_ok(const LtGemmArgs& a) {
  if (a.gemm.batch != 1) return false;
  if (a.epilogue == LtEpilogue::kGeluAuxBias || a.epilogue == LtEpilogue::kDGelu) {
    return a.aux_ld % 8 == 0 && a.aux_ld >= a.gemm.m;
  }
  return true;
}

int alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  int alignment = 1;
  while (alignment < 256 && address % (2 * static_cast<std::uintptr_t>(alignment)) == 0) {
    alignment *= 2;
  }
  return alignment;
}

}  // namespace rm::cuda

// The cuBLASLt calls of lt_gemm_args.h, evaluated on the host with cuBLASLt's documented
// semantics (a naive column-major GEMM, then the epilogue as cublasLt.h describes it), against
// the cpu backend's Linear, GELU and bias-gradient kernels in row-major terms. What could go
// wrong without a GPU to show it: the bias along the wrong dimension of D, the bias gradient
// reduced from the wrong operand, the pre-activation's leading dimension.
#include "kernels/cuda/lt_gemm_args.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"

namespace rm::cuda {
namespace {

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

float gelu(float x) {
  float y = 0;
  cpu::gelu_forward(&y, &x, 1);
  return y;
}
float gelu_grad(float x) {
  float d = 0, one = 1.0f;
  cpu::gelu_backward(&d, &x, &one, 1);
  return d;
}

// cublasLtMatmul as cublasLt.h documents it (batch 1, D = C in place). `first`/`second` are
// cuBLAS's A and B; `vec` the bias (read) or bias gradient (written); `aux` the pre-activation.
// Element (r, c) of a column-major matrix stored as `l` says (lt_layouts: what cuBLASLt is
// told), out of its bounds a test failure: a layout whose rows and columns were swapped, or
// whose ld is under its rows, is caught here rather than as wrong bits on a GPU.
float at(const float* m, const LtLayout& l, uint64_t r, uint64_t c, const char* which) {
  EXPECT_GE(l.ld, static_cast<int64_t>(l.rows)) << which << ": ld under its rows";
  EXPECT_LT(r, l.rows) << which << ": row past the layout";
  EXPECT_LT(c, l.cols) << which << ": column past the layout";
  if (r >= l.rows || c >= l.cols) return 0.0f;
  return m[r + c * static_cast<uint64_t>(l.ld)];
}

void reference_lt(const LtGemmArgs& a, const float* first, const float* second, float* D,
                  float* vec, float* aux) {
  const CublasGemmArgs& g = a.gemm;
  ASSERT_EQ(g.batch, 1);
  const LtLayouts l = lt_layouts(g);
  EXPECT_EQ(l.d.rows, static_cast<uint64_t>(g.m));
  EXPECT_EQ(l.d.cols, static_cast<uint64_t>(g.n));
  auto op_a = [&](int row, int p) {
    return g.op_a == GemmOp::kNoTrans ? at(first, l.a, row, p, "A") : at(first, l.a, p, row, "A");
  };
  auto op_b = [&](int p, int col) {
    return g.op_b == GemmOp::kNoTrans ? at(second, l.b, p, col, "B") : at(second, l.b, col, p, "B");
  };
  for (int col = 0; col < g.n; ++col) {
    for (int row = 0; row < g.m; ++row) {
      double acc = 0.0;
      for (int p = 0; p < g.k; ++p) acc += static_cast<double>(op_a(row, p)) * op_b(p, col);
      float& d = D[row + static_cast<size_t>(col) * g.ldc];
      float v = static_cast<float>(g.alpha * acc + (g.beta == 0.0f ? 0.0 : g.beta * double{d}));
      switch (a.epilogue) {
        case LtEpilogue::kBias:
          v += vec[row];
          break;
        case LtEpilogue::kGeluAuxBias:
          v += vec[row];
          aux[row + static_cast<size_t>(col) * a.aux_ld] = v;
          v = gelu(v);
          break;
        case LtEpilogue::kDGelu:
          v *= gelu_grad(aux[row + static_cast<size_t>(col) * a.aux_ld]);
          break;
        case LtEpilogue::kNone:
        case LtEpilogue::kBGradB:
          break;
      }
      d = v;
    }
  }
  if (a.epilogue == LtEpilogue::kBGradB) {
    for (int col = 0; col < g.n; ++col) {
      double s = 0.0;
      for (int p = 0; p < g.k; ++p) s += op_b(p, col);
      vec[col] = static_cast<float>(s);
    }
  }
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << "at " << i;
  }
}

constexpr int N = 6, C = 5, OC = 8;

TEST(LtGemmArgs, BiasEpilogueIsTheLinearForward) {
  const auto inp = random_floats(N * C, 1), W = random_floats(OC * C, 2), b = random_floats(OC, 3);
  std::vector<float> want(N * OC), out(N * OC, std::nanf(""));  // beta 0: out is not read
  cpu::linear_forward(want.data(), inp.data(), W.data(), b.data(), N, C, OC);
  const LtGemmArgs a = lt_linear_forward(N, C, OC, true, false);
  EXPECT_EQ(a.epilogue, LtEpilogue::kBias);
  EXPECT_EQ(a.gemm.beta, 0.0f);
  EXPECT_EQ(a.vector_length, OC);
  std::vector<float> bias = b;
  reference_lt(a, W.data(), inp.data(), out.data(), bias.data(), nullptr);
  expect_close(out, want);
  EXPECT_EQ(lt_linear_forward(N, C, OC, false, false).epilogue, LtEpilogue::kNone);
}

TEST(LtGemmArgs, GeluAuxBiasKeepsThePreActivationAndWritesGelu) {
  const auto inp = random_floats(N * C, 4), W = random_floats(OC * C, 5), b = random_floats(OC, 6);
  std::vector<float> pre_want(N * OC), out_want(N * OC);
  cpu::linear_forward(pre_want.data(), inp.data(), W.data(), b.data(), N, C, OC);
  cpu::gelu_forward(out_want.data(), pre_want.data(), N * OC);
  const LtGemmArgs a = lt_linear_forward(N, C, OC, true, true);
  EXPECT_EQ(a.epilogue, LtEpilogue::kGeluAuxBias);
  EXPECT_EQ(a.aux_ld, OC);
  std::vector<float> out(N * OC, std::nanf("")), pre(N * OC, std::nanf("")), bias = b;
  reference_lt(a, W.data(), inp.data(), out.data(), bias.data(), pre.data());
  expect_close(pre, pre_want);
  expect_close(out, out_want);
}

TEST(LtGemmArgs, DGeluIsTheInputGradientThroughGelu) {
  // The MLP's second Linear: its input was gelu(pre), pre [N, C]; dpre = gelu'(pre) * (dout W).
  const auto dout = random_floats(N * OC, 7), W = random_floats(OC * C, 8),
             pre = random_floats(N * C, 9);
  std::vector<float> dgelu(N * C), want(N * C), dw(OC * C, 0.0f);
  cpu::linear_backward(dgelu.data(), dw.data(), nullptr, dout.data(), pre.data(), W.data(), N, C,
                       OC);
  cpu::gelu_backward(want.data(), pre.data(), dgelu.data(), N * C);
  const LtGemmArgs a = lt_linear_dinp(N, C, OC, true);
  EXPECT_EQ(a.epilogue, LtEpilogue::kDGelu);
  EXPECT_EQ(a.aux_ld, C);
  std::vector<float> dpre(N * C, std::nanf("")), aux = pre;
  reference_lt(a, W.data(), dout.data(), dpre.data(), nullptr, aux.data());
  expect_close(dpre, want);
}

TEST(LtGemmArgs, BGradBIsTheBiasGradientOfTheWeightGemm) {
  const auto dout = random_floats(N * OC, 10), inp = random_floats(N * C, 11);
  // The weight gradient accumulates onto what is there; the bias gradient is written whole.
  const auto dw0 = random_floats(OC * C, 12);
  std::vector<float> dw_want = dw0, db_want(OC, 0.0f), dinp(N * C);
  const auto W = random_floats(OC * C, 13);
  cpu::linear_backward(dinp.data(), dw_want.data(), db_want.data(), dout.data(), inp.data(),
                       W.data(), N, C, OC);
  const LtGemmArgs a = lt_linear_dweight(N, C, OC, true);
  EXPECT_EQ(a.epilogue, LtEpilogue::kBGradB);
  EXPECT_EQ(a.gemm.beta, 1.0f);
  EXPECT_EQ(a.vector_length, OC);
  std::vector<float> dw = dw0, db(OC, std::nanf(""));
  reference_lt(a, inp.data(), dout.data(), dw.data(), db.data(), nullptr);
  expect_close(dw, dw_want);
  expect_close(db, db_want);
}

TEST(LtGemmArgs, AuxLeadingDimensionMustBeAMultipleOf8) {
  EXPECT_TRUE(lt_epilogue_shape_ok(lt_linear_forward(4, 16, 3072, true, true)));
  EXPECT_FALSE(lt_epilogue_shape_ok(lt_linear_forward(4, 16, 12, true, true)));
  EXPECT_FALSE(lt_epilogue_shape_ok(lt_linear_dinp(4, 12, 16, true)));
  EXPECT_TRUE(lt_epilogue_shape_ok(lt_linear_dinp(4, 3072, 768, true)));
  // The epilogues without an aux matrix have no such rule.
  EXPECT_TRUE(lt_epilogue_shape_ok(lt_linear_forward(4, 5, 7, true, false)));
  EXPECT_TRUE(lt_epilogue_shape_ok(lt_linear_dweight(4, 5, 7, true)));
}

TEST(LtGemmArgs, AlignmentIsTheLargestPowerOfTwoUpTo256) {
  EXPECT_EQ(alignment_of(nullptr), 256);
  EXPECT_EQ(alignment_of(reinterpret_cast<void*>(std::uintptr_t{4096})), 256);
  EXPECT_EQ(alignment_of(reinterpret_cast<void*>(std::uintptr_t{4096 + 16})), 16);
  EXPECT_EQ(alignment_of(reinterpret_cast<void*>(std::uintptr_t{4096 + 2})), 2);
  EXPECT_EQ(alignment_of(reinterpret_cast<void*>(std::uintptr_t{4096 + 1})), 1);
  EXPECT_EQ(alignment_of(reinterpret_cast<void*>(std::uintptr_t{128})), 128);
}

}  // namespace
}  // namespace rm::cuda

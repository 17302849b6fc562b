// The cuBLAS arguments of gemm_args.h, evaluated on the host by a naive column-major GEMM with
// cuBLAS's semantics, against the row-major results of the cpu backend: every transpose
// combination, sub-matrix leading dimensions, strided batches, and the exact calls (with their
// offsets, scales and accumulation) that the cuda linear and attention kernels make.
#include "kernels/cuda/gemm_args.h"

#include "kernels/cuda/classifier_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/elementwise_math.h"
#include "kernels/row_math.h"

namespace rm::cuda {
namespace {

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// cublasGemmStridedBatchedEx as documented, column-major, double accumulation: for each batch
// entry, C = alpha op(A) op(B) + beta C with C m x n (ld ldc), op(A) m x k, op(B) k x n; with
// beta == 0, C is not read. `first`/`second` are cuBLAS's A and B.
void reference_cublas(const CublasGemmArgs& g, const float* first, const float* second, float* C) {
  for (int e = 0; e < g.batch; ++e) {
    const float* A = first + e * g.stride_a;
    const float* B = second + e * g.stride_b;
    float* Ce = C + e * g.stride_c;
    for (int col = 0; col < g.n; ++col) {
      for (int row = 0; row < g.m; ++row) {
        double acc = 0.0;
        for (int p = 0; p < g.k; ++p) {
          const float a = g.op_a == GemmOp::kNoTrans ? A[row + static_cast<size_t>(p) * g.lda]
                                                     : A[p + static_cast<size_t>(row) * g.lda];
          const float b = g.op_b == GemmOp::kNoTrans ? B[p + static_cast<size_t>(col) * g.ldb]
                                                     : B[col + static_cast<size_t>(p) * g.ldb];
          acc += static_cast<double>(a) * b;
        }
        float& c = Ce[row + static_cast<size_t>(col) * g.ldc];
        c = static_cast<float>(g.alpha * acc + (g.beta == 0.0f ? 0.0 : g.beta * double{c}));
      }
    }
  }
}

// What the backend does with a row-major request: build the arguments, swap the operands.
void run_like_backend(const RowMajorGemm& g, const float* A, const float* B, float* C) {
  const CublasGemmArgs args = to_cublas(g);
  ASSERT_TRUE(args.operands_swapped);
  if (args.empty()) return;
  reference_cublas(args, B, A, C);
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
  }
}

TEST(GemmArgs, EveryTransposeWithSubMatrixLeadingDimensions) {
  const int M = 5, N = 7, K = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      RowMajorGemm g;
      g.trans_a = ta, g.trans_b = tb;
      g.M = M, g.N = N, g.K = K;
      g.alpha = 0.75f, g.beta = 0.5f;
      // Stored row lengths plus padding: the operands are views into wider buffers.
      g.lda = (ta ? M : K) + 2;
      g.ldb = (tb ? K : N) + 3;
      g.ldc = N + 4;
      const auto A = random_floats(static_cast<size_t>(ta ? K : M) * g.lda, 1);
      const auto B = random_floats(static_cast<size_t>(tb ? N : K) * g.ldb, 2);
      auto C = random_floats(static_cast<size_t>(M) * g.ldc, 3);
      auto want = C;
      cpu::sgemm(ta, tb, M, N, K, g.alpha, A.data(), g.lda, B.data(), g.ldb, g.beta, want.data(),
                 g.ldc);
      run_like_backend(g, A.data(), B.data(), C.data());
      SCOPED_TRACE(testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      expect_close(C, want, 1e-5f);  // the padding columns of C included: left untouched
      const CublasGemmArgs a = to_cublas(g);
      EXPECT_EQ(a.m, N);
      EXPECT_EQ(a.n, M);
      EXPECT_EQ(a.op_a, tb ? GemmOp::kTrans : GemmOp::kNoTrans);
      EXPECT_EQ(a.op_b, ta ? GemmOp::kTrans : GemmOp::kNoTrans);
    }
  }
}

TEST(GemmArgs, BetaZeroDoesNotReadC) {
  RowMajorGemm g;
  g.M = 2, g.N = 3, g.K = 4, g.lda = 4, g.ldb = 3, g.ldc = 3;
  const auto A = random_floats(8, 4), B = random_floats(12, 5);
  std::vector<float> C(6, std::nanf("")), want(6, std::nanf(""));
  cpu::sgemm(false, false, 2, 3, 4, 1.0f, A.data(), 4, B.data(), 3, 0.0f, want.data(), 3);
  run_like_backend(g, A.data(), B.data(), C.data());
  expect_close(C, want, 1e-5f);
}

TEST(GemmArgs, StridedBatchesAreIndependentGemms) {
  const int M = 4, N = 3, K = 5, batch = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      RowMajorGemm g;
      g.trans_a = ta, g.trans_b = tb;
      g.M = M, g.N = N, g.K = K, g.batch = batch;
      g.lda = (ta ? M : K) + 1, g.ldb = (tb ? K : N) + 1, g.ldc = N + 1;
      g.stride_a = static_cast<long long>(ta ? K : M) * g.lda + 3;
      g.stride_b = static_cast<long long>(tb ? N : K) * g.ldb + 5;
      g.stride_c = static_cast<long long>(M) * g.ldc + 2;
      const auto A = random_floats(static_cast<size_t>(g.stride_a) * batch, 6);
      const auto B = random_floats(static_cast<size_t>(g.stride_b) * batch, 7);
      auto C = random_floats(static_cast<size_t>(g.stride_c) * batch, 8);
      auto want = C;
      for (int e = 0; e < batch; ++e) {
        cpu::sgemm(ta, tb, M, N, K, 1.0f, A.data() + e * g.stride_a, g.lda,
                   B.data() + e * g.stride_b, g.ldb, 0.0f, want.data() + e * g.stride_c, g.ldc);
      }
      run_like_backend(g, A.data(), B.data(), C.data());
      expect_close(C, want, 1e-5f);
    }
  }
}

TEST(GemmArgs, RejectsWhatCpuSgemmRejects) {
  RowMajorGemm g;
  g.M = 2, g.N = 3, g.K = 4, g.lda = 4, g.ldb = 3, g.ldc = 3;
  EXPECT_NO_THROW(to_cublas(g));
  RowMajorGemm bad = g;
  bad.lda = 3;
  EXPECT_THROW(to_cublas(bad), std::invalid_argument);
  bad = g, bad.trans_a = true;  // A stored [K,M]: row length M = 2 <= 4, fine
  EXPECT_NO_THROW(to_cublas(bad));
  bad = g, bad.ldb = 2;
  EXPECT_THROW(to_cublas(bad), std::invalid_argument);
  bad = g, bad.trans_b = true;  // B stored [N,K]: needs ldb >= 4
  EXPECT_THROW(to_cublas(bad), std::invalid_argument);
  bad = g, bad.ldc = 2;
  EXPECT_THROW(to_cublas(bad), std::invalid_argument);
  bad = g, bad.M = -1;
  EXPECT_THROW(to_cublas(bad), std::invalid_argument);
  bad = g, bad.batch = -1;
  EXPECT_THROW(to_cublas(bad), std::invalid_argument);
  bad = g, bad.M = 0;
  EXPECT_TRUE(to_cublas(bad).empty());
}

// ---- The linear layer's calls ----------------------------------------------------------------

TEST(GemmArgs, LinearCallsMatchCpuLinear) {
  const int N = 6, C = 5, OC = 7;
  const auto inp = random_floats(N * C, 10), W = random_floats(OC * C, 11),
             bias = random_floats(OC, 12), dout = random_floats(N * OC, 13);
  for (bool has_bias : {false, true}) {
    std::vector<float> want(N * OC), got(N * OC, std::nanf(""));
    cpu::linear_forward(want.data(), inp.data(), W.data(), has_bias ? bias.data() : nullptr, N, C,
                        OC);
    if (has_bias) {  // the backend seeds every row with the bias first
      for (int n = 0; n < N; ++n) std::copy(bias.begin(), bias.end(), got.begin() + n * OC);
    }
    run_like_backend(linear_forward_gemm(N, C, OC, has_bias), inp.data(), W.data(), got.data());
    expect_close(got, want, 1e-5f);
  }
  std::vector<float> dinp_want(N * C), dinp(N * C, std::nanf(""));
  auto dw_want = random_floats(OC * C, 14);  // accumulated into
  auto dw = dw_want;
  std::vector<float> dbias(OC, 0.0f);
  cpu::linear_backward(dinp_want.data(), dw_want.data(), dbias.data(), dout.data(), inp.data(),
                       W.data(), N, C, OC);
  run_like_backend(linear_dinp_gemm(N, C, OC), dout.data(), W.data(), dinp.data());
  run_like_backend(linear_dweight_gemm(N, C, OC), dout.data(), inp.data(), dw.data());
  expect_close(dinp, dinp_want, 1e-5f);
  expect_close(dw, dw_want, 1e-5f);
}

// The padded classifier's pipeline (CudaLayers::queue_classifier_forward_backward), emulated:
// the logits over the padded wte copy, the loss over the first V columns, the two backward
// GEMMs over dlogits with its padding columns zero -- against the unpadded linear layer.
TEST(GemmArgs, PaddedClassifierMatchesTheUnpaddedLinear) {
  EXPECT_EQ(padded_vocab(50257), 50304);  // GPT-2: 393 x 128, as llm.c pads it
  EXPECT_EQ(padded_vocab(128), 128);
  EXPECT_EQ(padded_vocab(65), 128);
  EXPECT_EQ(padded_vocab(0), 0);
  EXPECT_THROW(padded_vocab(-1), std::invalid_argument);
  EXPECT_THROW(padded_vocab(INT_MAX), std::invalid_argument);
  EXPECT_EQ(classifier_scratch_elements(16384, 768, 50257), 16384u * 50304 + 50304u * 768);

  const int N = 6, C = 5, V = 131, Vp = padded_vocab(V);
  ASSERT_EQ(Vp, 256);
  const auto inp = random_floats(N * C, 20), wte = random_floats(V * C, 21);
  std::vector<float> wte_p(static_cast<size_t>(Vp) * C, 0.0f);
  std::copy(wte.begin(), wte.end(), wte_p.begin());
  std::vector<float> logits(static_cast<size_t>(N) * Vp, std::nanf(""));
  run_like_backend(linear_forward_gemm(N, C, Vp, false), inp.data(), wte_p.data(), logits.data());
  std::vector<float> want_logits(static_cast<size_t>(N) * V);
  cpu::linear_forward(want_logits.data(), inp.data(), wte.data(), nullptr, N, C, V);
  for (int n = 0; n < N; ++n) {
    for (int v = 0; v < Vp; ++v) {
      const float got = logits[static_cast<size_t>(n) * Vp + v];
      if (v < V) {
        ASSERT_NEAR(got, want_logits[static_cast<size_t>(n) * V + v], 1e-5f);
      } else {
        ASSERT_EQ(got, 0.0f) << "padding column " << v;
      }
    }
  }
  // A dlogits with zero padding columns (as the cross-entropy kernel leaves it).
  const auto d = random_floats(static_cast<size_t>(N) * V, 22);
  std::vector<float> dlogits(static_cast<size_t>(N) * Vp, 0.0f);
  for (int n = 0; n < N; ++n) {
    std::copy(d.begin() + n * V, d.begin() + (n + 1) * V, dlogits.begin() + n * Vp);
  }
  std::vector<float> dinp_want(N * C), dinp(N * C, std::nanf(""));
  auto dw_want = random_floats(static_cast<size_t>(V) * C, 23);
  auto dw = dw_want;
  cpu::linear_backward(dinp_want.data(), dw_want.data(), nullptr, d.data(), inp.data(), wte.data(),
                       N, C, V);
  run_like_backend(linear_dinp_gemm(N, C, Vp), dlogits.data(), wte_p.data(), dinp.data());
  auto dw_split = dw;
  run_like_backend(classifier_dweight_gemm(N, C, V, Vp), dlogits.data(), inp.data(), dw.data());
  expect_close(dinp, dinp_want, 1e-5f);
  expect_close(dw, dw_want, 1e-5f);  // V rows written: dw has exactly V * C elements
  // The same in two GEMMs, as the backend runs it: rows [0, 128) and [128, 131).
  const SplitGemm two = classifier_dweight_gemms(N, C, V, Vp);
  ASSERT_EQ(two.split, 128);
  EXPECT_EQ(two.tail.M, 3);
  run_like_backend(two.head, dlogits.data(), inp.data(), dw_split.data());
  run_like_backend(two.tail, dlogits.data() + two.split, inp.data(),
                   dw_split.data() + static_cast<size_t>(two.split) * C);
  expect_close(dw_split, dw_want, 1e-5f);
  EXPECT_EQ(classifier_dweight_gemms(N, C, 256, 256).tail.M, 0);  // nothing left over
}

// ---- The attention's calls: the backend's whole pipeline, emulated on the host ----------------

// The causal softmax kernel's math, one row.
void softmax_rows(float* att, const float* scores, int rows, int Tn) {
  for (int r = 0; r < rows; ++r) {
    const int i = r % Tn;
    const float* p = scores + static_cast<size_t>(r) * Tn;
    float* a = att + static_cast<size_t>(r) * Tn;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j <= i; ++j) mx = std::max(mx, p[j]);
    for (int j = 0; j <= i; ++j) sum += fast_expf(p[j] - mx);
    const float inv = 1.0f / sum;
    for (int j = 0; j < Tn; ++j) a[j] = j <= i ? fast_expf(p[j] - mx) * inv : 0.0f;
  }
}

void softmax_backward_rows(float* dpre, const float* datt, const float* att, int rows, int Tn) {
  for (int r = 0; r < rows; ++r) {
    const int i = r % Tn;
    const float* a = att + static_cast<size_t>(r) * Tn;
    const float* d = datt + static_cast<size_t>(r) * Tn;
    float* o = dpre + static_cast<size_t>(r) * Tn;
    float dot = 0.0f;
    for (int j = 0; j <= i; ++j) dot += a[j] * d[j];
    for (int j = 0; j < Tn; ++j) o[j] = j <= i ? softmax_backward_element(a[j], d[j], dot) : 0.0f;
  }
}

struct AttentionShape {
  int B, Tn, C, H;
};

class AttentionCalls : public ::testing::TestWithParam<AttentionShape> {};

TEST_P(AttentionCalls, ForwardAndBackwardMatchCpuAttention) {
  const auto [B, Tn, C, H] = GetParam();
  const size_t NC = static_cast<size_t>(B) * Tn * C, A = static_cast<size_t>(B) * H * Tn * Tn;
  const auto qkv = random_floats(3 * NC, 20), dout = random_floats(NC, 21);
  std::vector<float> out_want(NC), att_want(A), dqkv_want(3 * NC), scratch(A);
  cpu::attention_forward(out_want.data(), att_want.data(), qkv.data(), B, Tn, C, H);
  cpu::attention_backward(dqkv_want.data(), scratch.data(), dout.data(), qkv.data(),
                          att_want.data(), B, Tn, C, H);

  // Both plans: float's (scores in att: grouped by head when H < B) and bf16's (by entry).
  for (const bool scores_in_att : {true, false}) {
    const AttentionPlan plan = attention_plan(B, Tn, C, H, scores_in_att);
    SCOPED_TRACE(testing::Message() << "scores_in_att " << scores_in_att);
    EXPECT_EQ(plan.calls, scores_in_att ? std::min(B, H) : B);
    EXPECT_EQ(plan.calls * plan.batch, B * H);
    EXPECT_EQ(plan.grouping == AttentionGrouping::kByHead, scores_in_att && H < B);
    // Forward, as attention.cu runs it. Float: all scores formed in att, one softmax over every
    // row in place, then all values. bf16: entry by entry, its scores in a scratch of H*Tn*Tn
    // floats at offset 0, the softmax from there into att.
    std::vector<float> out(NC, std::nanf("")), att(A, std::nanf(""));
    std::vector<float> scores(static_cast<size_t>(H) * Tn * Tn, std::nanf(""));
    if (scores_in_att) {
      for (int g = 0; g < plan.calls; ++g) {
        const AttentionOffsets o = plan.offsets(g);
        run_like_backend(attention_scores_gemm(plan), qkv.data() + o.qkv, qkv.data() + o.qkv + C,
                         att.data() + o.att);
      }
      softmax_rows(att.data(), att.data(), B * H * Tn, Tn);
      for (int g = 0; g < plan.calls; ++g) {
        const AttentionOffsets o = plan.offsets(g);
        run_like_backend(attention_values_gemm(plan), att.data() + o.att,
                         qkv.data() + o.qkv + 2 * C, out.data() + o.out);
      }
    } else {
      for (int g = 0; g < plan.calls; ++g) {
        const AttentionOffsets o = plan.offsets(g);
        run_like_backend(attention_scores_gemm(plan), qkv.data() + o.qkv, qkv.data() + o.qkv + C,
                         scores.data());
        softmax_rows(att.data() + o.att, scores.data(), H * Tn, Tn);
        run_like_backend(attention_values_gemm(plan), att.data() + o.att,
                         qkv.data() + o.qkv + 2 * C, out.data() + o.out);
      }
    }
    expect_close(out, out_want, 1e-5f);
    for (size_t bh = 0; bh < static_cast<size_t>(B) * H; ++bh) {
      for (int i = 0; i < Tn; ++i) {
        for (int j = 0; j <= i; ++j) {
          const size_t k = (bh * Tn + i) * Tn + j;
          ASSERT_NEAR(att[k], att_want[k], 1e-6f) << "bh " << bh << " i " << i << " j " << j;
        }
      }
    }

    // Backward. Float: all of dV and datt, the softmax backward over every row in place, then
    // all of dQ and dK. bf16: entry by entry, datt in the float scratch, dpre in datt's place.
    std::vector<float> dqkv(3 * NC, std::nanf("")), dpre(A, std::nanf(""));
    auto values_and_datt = [&](int g, float* datt_g) {
      const AttentionOffsets o = plan.offsets(g);
      run_like_backend(attention_dvalues_gemm(plan), att.data() + o.att, dout.data() + o.out,
                       dqkv.data() + o.qkv + 2 * C);
      run_like_backend(attention_datt_gemm(plan), dout.data() + o.out, qkv.data() + o.qkv + 2 * C,
                       datt_g);
    };
    auto queries_and_keys = [&](int g) {
      const AttentionOffsets o = plan.offsets(g);
      const float* q = qkv.data() + o.qkv;
      float* dq = dqkv.data() + o.qkv;
      run_like_backend(attention_dq_gemm(plan), dpre.data() + o.att, q + C, dq);
      run_like_backend(attention_dk_gemm(plan), dpre.data() + o.att, q, dq + C);
    };
    if (scores_in_att) {
      for (int g = 0; g < plan.calls; ++g) values_and_datt(g, dpre.data() + plan.offsets(g).att);
      softmax_backward_rows(dpre.data(), dpre.data(), att.data(), B * H * Tn, Tn);
      for (int g = 0; g < plan.calls; ++g) queries_and_keys(g);
    } else {
      for (int g = 0; g < plan.calls; ++g) {
        const size_t at = plan.offsets(g).att;
        values_and_datt(g, scores.data());
        softmax_backward_rows(dpre.data() + at, scores.data(), att.data() + at, H * Tn, Tn);
        queries_and_keys(g);
      }
    }
    expect_close(dqkv, dqkv_want, 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionCalls,
                         ::testing::Values(AttentionShape{1, 1, 4, 1}, AttentionShape{2, 5, 12, 3},
                                           AttentionShape{3, 9, 16, 4}, AttentionShape{2, 70, 8, 2},
                                           AttentionShape{5, 7, 12, 2},  // by head: H < B
                                           AttentionShape{4, 6, 6, 3}));

}  // namespace
}  // namespace rm::cuda

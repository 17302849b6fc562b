// Every operation of the cuda backend (CudaCompute) against the cpu backend on the same random
// inputs, for float and bf16 layers. Each test skips, with the reason, where no GPU is visible.
//
// Tolerances (|got - want| <= atol * max|want| + rtol * |want|):
//  - float, TF32 off: rtol 1e-4, atol 1e-5 -- only the summation order differs (cuBLAS's
//    blocking, block reductions vs `omp simd` lanes, FMA contraction on the GPU).
//  - bf16 outputs: rtol 1.6e-2, atol 1e-2 -- a bf16 ulp is 2^-8 relative, and a different
//    summation order may round the other way; attention's value GEMM also reads the bf16-rounded
//    probabilities where the cpu emulation keeps them in float (cuda/attention.h).
//  - float outputs of bf16 layers (parameter gradients, losses): rtol 1e-3, atol 1e-4.
//  - casts, memory operations and deterministic column sums: exact.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/compute.h"
#include "kernels/cpu/cpu_compute.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_compute.h"
#include "kernels/cuda/cuda_context.h"
#if RM_HAVE_CUDNN
#include "kernels/cuda/cudnn_sdpa.h"
#endif
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gemm.h"
#include "testing/scoped_env.h"

namespace rm::cuda {
namespace {

// ---- Helpers ---------------------------------------------------------------------------------

void ctx_zero(void* p, size_t bytes, cudaStream_t stream) {
  ASSERT_EQ(cudaMemsetAsync(p, 0, bytes, stream), cudaSuccess);
}

struct Tolerance {
  double rtol, atol;
};
template <typename T>
constexpr Tolerance kOutputTol =
    std::is_same_v<T, float> ? Tolerance{1e-4, 1e-5} : Tolerance{1.6e-2, 1e-2};
template <typename T>
constexpr Tolerance kGradTol =
    std::is_same_v<T, float> ? Tolerance{1e-4, 1e-5} : Tolerance{1e-3, 1e-4};

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                 Tolerance tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol.atol * scale + tol.rtol * std::fabs(static_cast<double>(want[i])))) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " differ; first at " << first << ": got " << got[first]
         << " want " << want[first];
}

std::vector<float> random_floats(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <typename T>
std::vector<float> widen(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = load(v[i]);
  return out;
}

// The same data in both backends' memory.
template <typename T>
class Both {
 public:
  Both(Compute& gpu, Compute& cpu, const std::vector<T>& host)
      : gpu_(gpu), cpu_(cpu), g_(gpu, host.size()), c_(cpu, host.size()) {
    gpu.upload(g_.data(), host.data(), host.size() * sizeof(T));
    cpu.upload(c_.data(), host.data(), host.size() * sizeof(T));
  }
  T* gpu() { return g_.data(); }
  T* cpu() { return c_.data(); }
  std::vector<T> gpu_host() {
    std::vector<T> h(g_.size());
    gpu_.download(h.data(), g_.data(), h.size() * sizeof(T));
    return h;
  }
  std::vector<T> cpu_host() {
    std::vector<T> h(c_.size());
    cpu_.download(h.data(), c_.data(), h.size() * sizeof(T));
    return h;
  }
  std::vector<float> gpu_f() { return widen(gpu_host()); }
  std::vector<float> cpu_f() { return widen(cpu_host()); }

 private:
  Compute& gpu_;
  Compute& cpu_;
  DeviceArray<T> g_, c_;
};

template <typename T>
std::vector<T> random_t(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  const std::vector<float> f = random_floats(n, seed, lo, hi);
  std::vector<T> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = store<T>(f[i]);
  return t;
}

std::vector<int> random_ints(size_t n, unsigned seed, int lo, int hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> v(n);
  for (int& x : v) x = dist(gen);
  return v;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (visible_device_count(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
    gpu_ = make_cuda_compute(0, /*allow_tf32=*/false);
    cpu_ = cpu::make_cpu_compute(1);
  }
  Compute& gpu() { return *gpu_; }
  Compute& cpu() { return *cpu_; }
  template <typename T>
  Both<T> both(const std::vector<T>& host) {
    return Both<T>(*gpu_, *cpu_, host);
  }

  std::unique_ptr<Compute> gpu_, cpu_;
};

template <typename T>
class CudaLayersTest : public CudaTest {
 protected:
  LayerKernels<T>& gl() { return gpu().layers<T>(); }
  LayerKernels<T>& cl() { return cpu().layers<T>(); }
};
using StorageTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(CudaLayersTest, StorageTypes);

// ---- Layers ------------------------------------------------------------------------------------

TYPED_TEST(CudaLayersTest, Embedding) {
  using T = TypeParam;
  const int B = 3, Tn = 17, C = 40, V = 23;
  auto tokens = this->both(random_ints(B * Tn, 1, 0, V - 1));
  auto wte = this->both(random_t<T>(V * C, 2)), wpe = this->both(random_t<T>(Tn * C, 3));
  for (bool with_wpe : {false, true}) {
    auto out = this->both(std::vector<T>(B * Tn * C));
    this->gl().embedding_forward(out.gpu(), tokens.gpu(), wte.gpu(), with_wpe ? wpe.gpu() : nullptr,
                                 B, Tn, C);
    this->cl().embedding_forward(out.cpu(), tokens.cpu(), wte.cpu(), with_wpe ? wpe.cpu() : nullptr,
                                 B, Tn, C);
    EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), {0, 0}));  // one add, one rounding: exact
  }
  auto dout = this->both(random_t<T>(B * Tn * C, 4));
  auto dwte = this->both(random_floats(V * C, 5)), dwpe = this->both(random_floats(Tn * C, 6));
  this->gl().embedding_backward(dwte.gpu(), dwpe.gpu(), dout.gpu(), tokens.gpu(), B, Tn, C);
  this->cl().embedding_backward(dwte.cpu(), dwpe.cpu(), dout.cpu(), tokens.cpu(), B, Tn, C);
  // Same order of additions as the cpu: exact.
  EXPECT_TRUE(close(dwte.gpu_f(), dwte.cpu_f(), {0, 0}));
  EXPECT_TRUE(close(dwpe.gpu_f(), dwpe.cpu_f(), {0, 0}));
}

// The dwte kernel sorts positions by token: a token at 60% of 1200 positions (one long run), the
// rest spread, a width that is not a multiple of 32; still the cpu's order, bit for bit.
TYPED_TEST(CudaLayersTest, EmbeddingBackwardWithOneFrequentToken) {
  using T = TypeParam;
  const int B = 4, Tn = 300, C = 100, V = 50, N = B * Tn;
  std::vector<int> t = random_ints(N, 7, 0, V - 1);
  const std::vector<int> coin = random_ints(N, 8, 0, 9);
  for (int n = 0; n < N; ++n) {
    if (coin[n] < 6) t[n] = 7;
  }
  auto tokens = this->both(t);
  auto dout = this->both(random_t<T>(static_cast<size_t>(N) * C, 9));
  auto dwte = this->both(random_floats(V * C, 10)), dwpe = this->both(random_floats(Tn * C, 11));
  for (int round = 0; round < 2; ++round) {  // accumulates onto the first round's sums
    this->gl().embedding_backward(dwte.gpu(), dwpe.gpu(), dout.gpu(), tokens.gpu(), B, Tn, C);
    this->cl().embedding_backward(dwte.cpu(), dwpe.cpu(), dout.cpu(), tokens.cpu(), B, Tn, C);
  }
  EXPECT_TRUE(close(dwte.gpu_f(), dwte.cpu_f(), {0, 0}));
  EXPECT_TRUE(close(dwpe.gpu_f(), dwpe.cpu_f(), {0, 0}));
}

TYPED_TEST(CudaLayersTest, ContextEmbedding) {
  using T = TypeParam;
  const int B = 2, Tn = 9, K = 3, E = 12, V = 11;
  auto tokens = this->both(random_ints(B * Tn, 7, 0, V - 1));
  auto emb = this->both(random_t<T>(V * E, 8));
  auto x = this->both(random_t<T>(B * Tn * K * E, 9));  // overwritten, zeros included
  this->gl().context_embedding_forward(x.gpu(), tokens.gpu(), emb.gpu(), B, Tn, K, E);
  this->cl().context_embedding_forward(x.cpu(), tokens.cpu(), emb.cpu(), B, Tn, K, E);
  EXPECT_TRUE(close(x.gpu_f(), x.cpu_f(), {0, 0}));
  auto dx = this->both(random_t<T>(B * Tn * K * E, 10));
  auto demb = this->both(random_floats(V * E, 11));
  this->gl().context_embedding_backward(demb.gpu(), dx.gpu(), tokens.gpu(), B, Tn, K, E);
  this->cl().context_embedding_backward(demb.cpu(), dx.cpu(), tokens.cpu(), B, Tn, K, E);
  EXPECT_TRUE(close(demb.gpu_f(), demb.cpu_f(), {0, 0}));
}

TYPED_TEST(CudaLayersTest, LayerNorm) {
  using T = TypeParam;
  // The general kernels: one partial warp, one block, more columns than threads; one chunk of
  // rows for the column sums and three (column_sums.cuh). The row kernels: widths of whole
  // vectors a lane (256: one bf16 vector, 768: GPT-2's), fewer rows than warps and more.
  const std::pair<int, int> shapes[] = {{13, 7},     {13, 64},  {13, 1100}, {600, 7},
                                        {600, 1100}, {13, 256}, {600, 768}, {3000, 768}};
  for (const auto& [N, C] : shapes) {
    SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(C));
    auto inp = this->both(random_t<T>(N * C, 12, 2.0f, 5.0f));  // an offset mean
    auto w = this->both(random_t<T>(C, 13)), b = this->both(random_t<T>(C, 14));
    auto out = this->both(std::vector<T>(N * C));
    auto mean = this->both(std::vector<float>(N)), rstd = this->both(std::vector<float>(N));
    this->gl().layernorm_forward(out.gpu(), mean.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), b.gpu(), N,
                                 C);
    this->cl().layernorm_forward(out.cpu(), mean.cpu(), rstd.cpu(), inp.cpu(), w.cpu(), b.cpu(), N,
                                 C);
    EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), kOutputTol<T>));
    EXPECT_TRUE(close(mean.gpu_f(), mean.cpu_f(), {1e-5, 1e-6}));
    EXPECT_TRUE(close(rstd.gpu_f(), rstd.cpu_f(), {1e-4, 1e-6}));
    auto dout = this->both(random_t<T>(N * C, 15));
    auto dinp = this->both(random_t<T>(N * C, 16));  // ADDED to
    auto dw = this->both(random_floats(C, 17)), db = this->both(random_floats(C, 18));
    // Both read the cpu's statistics, so only the backward is compared.
    auto m = this->both(mean.cpu_host()), r = this->both(rstd.cpu_host());
    this->gl().layernorm_backward(dinp.gpu(), dw.gpu(), db.gpu(), dout.gpu(), inp.gpu(), w.gpu(),
                                  m.gpu(), r.gpu(), N, C);
    this->cl().layernorm_backward(dinp.cpu(), dw.cpu(), db.cpu(), dout.cpu(), inp.cpu(), w.cpu(),
                                  m.cpu(), r.cpu(), N, C);
    EXPECT_TRUE(close(dinp.gpu_f(), dinp.cpu_f(), kOutputTol<T>));
    EXPECT_TRUE(close(dw.gpu_f(), dw.cpu_f(), kGradTol<T>));
    EXPECT_TRUE(close(db.gpu_f(), db.cpu_f(), kGradTol<T>));
  }
}

// The residual add fused into the layernorm after it: the sum, the output and the statistics
// are the bits of add() then layernorm_forward() on the GPU -- through the rows kernel (768,
// 256) and the fallback (1100, 7) -- also with the sum written over one of its inputs.
TYPED_TEST(CudaLayersTest, ResidualLayerNormIsTheAddThenTheLayerNorm) {
  using T = TypeParam;
  const std::pair<int, int> shapes[] = {{13, 7}, {13, 1100}, {13, 256}, {600, 768}, {3000, 768}};
  for (const auto& [N, C] : shapes) {
    for (const bool in_place : {false, true}) {
      SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(C) + (in_place ? " in place" : ""));
      const size_t NC = static_cast<size_t>(N) * C;
      auto a = this->both(random_t<T>(NC, 20, 2.0f, 5.0f)), b = this->both(random_t<T>(NC, 21));
      auto a2 = this->both(a.gpu_host());
      auto w = this->both(random_t<T>(C, 22)), bias = this->both(random_t<T>(C, 23));
      auto sum = this->both(std::vector<T>(NC)), want_sum = this->both(std::vector<T>(NC));
      auto out = this->both(std::vector<T>(NC)), want = this->both(std::vector<T>(NC));
      auto mean = this->both(std::vector<float>(N)), rstd = this->both(std::vector<float>(N));
      auto want_mean = this->both(std::vector<float>(N)),
           want_rstd = this->both(std::vector<float>(N));
      T* const fused_sum = in_place ? a2.gpu() : sum.gpu();
      this->gl().residual_layernorm_forward(fused_sum, out.gpu(), mean.gpu(), rstd.gpu(), a2.gpu(),
                                            b.gpu(), w.gpu(), bias.gpu(), N, C);
      this->gl().add(want_sum.gpu(), a.gpu(), b.gpu(), NC);
      this->gl().layernorm_forward(want.gpu(), want_mean.gpu(), want_rstd.gpu(), want_sum.gpu(),
                                   w.gpu(), bias.gpu(), N, C);
      const std::vector<T> got_sum = in_place ? a2.gpu_host() : sum.gpu_host();
      const std::vector<T> exp_sum = want_sum.gpu_host(), got = out.gpu_host(),
                           exp = want.gpu_host();
      EXPECT_EQ(std::memcmp(got_sum.data(), exp_sum.data(), NC * sizeof(T)), 0) << "sum";
      EXPECT_EQ(std::memcmp(got.data(), exp.data(), NC * sizeof(T)), 0) << "layernorm";
      EXPECT_EQ(mean.gpu_host(), want_mean.gpu_host());
      EXPECT_EQ(rstd.gpu_host(), want_rstd.gpu_host());
    }
  }
}

TYPED_TEST(CudaLayersTest, Linear) {
  using T = TypeParam;
  // 29 outputs: the scalar bias copy; 64: the 16-byte one (gemm.cu); 600 rows: three row
  // chunks of the bias gradient's column sums (column_sums.cuh).
  // 264: two column blocks of bf16's 16-byte bias gradient (bias_gradient.h), the second partial.
  for (auto [N, OC] :
       std::vector<std::pair<int, int>>{{37, 29}, {37, 64}, {600, 64}, {600, 264}}) {
    SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(OC));
    const int C = 48;
    auto inp = this->both(random_t<T>(N * C, 20)), w = this->both(random_t<T>(OC * C, 21));
    auto bias = this->both(random_t<T>(OC, 22)), dout = this->both(random_t<T>(N * OC, 23));
    for (bool with_bias : {false, true}) {
      auto out = this->both(random_t<T>(N * OC, 24));  // overwritten
      this->gl().linear_forward(out.gpu(), inp.gpu(), w.gpu(), with_bias ? bias.gpu() : nullptr, N,
                                C, OC);
      this->cl().linear_forward(out.cpu(), inp.cpu(), w.cpu(), with_bias ? bias.cpu() : nullptr, N,
                                C, OC);
      EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), kOutputTol<T>));
    }
    for (bool with_dinp : {false, true}) {
      auto dinp = this->both(random_t<T>(N * C, 25));
      auto dw = this->both(random_floats(OC * C, 26)), db = this->both(random_floats(OC, 27));
      this->gl().linear_backward(with_dinp ? dinp.gpu() : nullptr, dw.gpu(), db.gpu(), dout.gpu(),
                                 inp.gpu(), w.gpu(), N, C, OC);
      this->cl().linear_backward(with_dinp ? dinp.cpu() : nullptr, dw.cpu(), db.cpu(), dout.cpu(),
                                 inp.cpu(), w.cpu(), N, C, OC);
      EXPECT_TRUE(close(dinp.gpu_f(), dinp.cpu_f(), kOutputTol<T>));  // untouched when skipped
      EXPECT_TRUE(close(dw.gpu_f(), dw.cpu_f(), kGradTol<T>));
      // The column sums add rows in another order than the CPU (column_sums.cuh): float
      // rounding apart, the same sums.
      EXPECT_TRUE(close(db.gpu_f(), db.cpu_f(), kGradTol<T>));
    }
  }
}

TYPED_TEST(CudaLayersTest, LinearWithGeluForwardAndBackwardMatchTheTwoCalls) {
  using T = TypeParam;
  // {N, C, OC}: 48 and 64 take cuBLASLt's GELU epilogues in bf16 (gemm.h); 44 and 29 are not
  // multiples of 8, which the pre-activation's leading dimension must be: the unfused path.
  for (auto [N, C, OC] : std::vector<std::tuple<int, int, int>>{{37, 48, 64}, {37, 44, 29}}) {
    SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(C) + " -> " + std::to_string(OC));
    auto inp = this->both(random_t<T>(N * C, 40)), w = this->both(random_t<T>(OC * C, 41));
    auto bias = this->both(random_t<T>(OC, 42));
    auto out = this->both(random_t<T>(N * OC, 43)), pre = this->both(random_t<T>(N * OC, 44));
    this->gl().linear_gelu_forward(out.gpu(), pre.gpu(), inp.gpu(), w.gpu(), bias.gpu(), N, C, OC);
    this->cl().linear_gelu_forward(out.cpu(), pre.cpu(), inp.cpu(), w.cpu(), bias.cpu(), N, C, OC);
    EXPECT_TRUE(close(pre.gpu_f(), pre.cpu_f(), kOutputTol<T>));
    EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), kOutputTol<T>));
    // The backward of a Linear [N, C] -> [N, OC] whose input was gelu(pre_in), pre_in [N, C].
    auto pre_in = this->both(random_t<T>(N * C, 45, -3.0f, 3.0f));
    auto dout = this->both(random_t<T>(N * OC, 46)), dpre = this->both(random_t<T>(N * C, 47));
    auto dw = this->both(random_floats(OC * C, 48)), db = this->both(random_floats(OC, 49));
    this->gl().linear_backward_into_gelu(dpre.gpu(), dw.gpu(), db.gpu(), dout.gpu(), inp.gpu(),
                                         w.gpu(), pre_in.gpu(), N, C, OC);
    this->cl().linear_backward_into_gelu(dpre.cpu(), dw.cpu(), db.cpu(), dout.cpu(), inp.cpu(),
                                         w.cpu(), pre_in.cpu(), N, C, OC);
    EXPECT_TRUE(close(dpre.gpu_f(), dpre.cpu_f(), kOutputTol<T>));
    EXPECT_TRUE(close(dw.gpu_f(), dw.cpu_f(), kGradTol<T>));
    EXPECT_TRUE(close(db.gpu_f(), db.cpu_f(), kGradTol<T>));
  }
}

// B=2, H=4 and B=5, H=2: for fp32, the pairs grouped by batch entry and by head (H < B) --
// gemm_args.h's AttentionPlan.
TYPED_TEST(CudaLayersTest, Attention) {
  using T = TypeParam;
  struct Shape {
    int B, Tn, C, H;
  };
  for (const Shape shape : {Shape{2, 1, 48, 4}, Shape{2, 7, 48, 4}, Shape{2, 70, 48, 4},
                            Shape{5, 7, 24, 2}, Shape{5, 70, 24, 2}}) {
    const auto [B, Tn, C, H] = shape;
    SCOPED_TRACE(testing::Message() << "B " << B << " Tn " << Tn << " H " << H);
    const size_t NC = static_cast<size_t>(B) * Tn * C, A = static_cast<size_t>(B) * H * Tn * Tn;
    auto qkv = this->both(random_t<T>(3 * NC, 30, -2.0f, 2.0f));
    // hs = 12: the materialised path for bf16 too (flash takes multiples of 16; FlashAttention*).
    ASSERT_EQ(this->gl().attention_buffers(B, Tn, C, H).saved, A);
    auto out = this->both(std::vector<T>(NC)), att = this->both(std::vector<T>(A));
    this->gl().attention_forward(out.gpu(), att.gpu(), qkv.gpu(), B, Tn, C, H);
    this->cl().attention_forward(out.cpu(), att.cpu(), qkv.cpu(), B, Tn, C, H);
    EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), kOutputTol<T>));
    // Only the causal part of att is specified; the cuda backend writes zeros above it.
    std::vector<float> ga = att.gpu_f(), ca = att.cpu_f();
    for (size_t r = 0; r < static_cast<size_t>(B) * H * Tn; ++r) {
      const int i = static_cast<int>(r % Tn);
      for (int j = i + 1; j < Tn; ++j) {
        ASSERT_EQ(ga[r * Tn + j], 0.0f);
        ca[r * Tn + j] = 0.0f;
      }
    }
    EXPECT_TRUE(close(ga, ca, kOutputTol<T>));
    auto dout = this->both(random_t<T>(NC, 31));
    auto dqkv = this->both(random_t<T>(3 * NC, 32));  // overwritten
    auto scratch = this->both(std::vector<T>(A));
    // Each backend reads its own forward's att (the cuda backward relies on its zeros).
    this->gl().attention_backward(dqkv.gpu(), scratch.gpu(), dout.gpu(), qkv.gpu(), att.gpu(),
                                  out.gpu(), B, Tn, C, H);
    this->cl().attention_backward(dqkv.cpu(), scratch.cpu(), dout.cpu(), qkv.cpu(), att.cpu(),
                                  out.cpu(), B, Tn, C, H);
    EXPECT_TRUE(close(dqkv.gpu_f(), dqkv.cpu_f(), kOutputTol<T>));
  }
  auto x = this->both(std::vector<T>(30));
  EXPECT_THROW(this->gl().attention_forward(x.gpu(), x.gpu(), x.gpu(), 1, 1, 10, 3),
               std::invalid_argument);
}

TYPED_TEST(CudaLayersTest, GeluAndAdd) {
  using T = TypeParam;
  // An odd count takes the scalar kernels, a multiple of 8 the 16-byte ones (vec16_ok).
  for (size_t n : {size_t{100003}, size_t{100000}}) {
    SCOPED_TRACE(n);
    auto inp = this->both(random_t<T>(n, 40, -8.0f, 8.0f)), dout = this->both(random_t<T>(n, 41));
    auto out = this->both(std::vector<T>(n)), dinp = this->both(std::vector<T>(n));
    this->gl().gelu_forward(out.gpu(), inp.gpu(), n);
    this->cl().gelu_forward(out.cpu(), inp.cpu(), n);
    this->gl().gelu_backward(dinp.gpu(), inp.gpu(), dout.gpu(), n);
    this->cl().gelu_backward(dinp.cpu(), inp.cpu(), dout.cpu(), n);
    // expf on the GPU vs the cpu's polynomial: a few ulp.
    EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), kOutputTol<T>));
    EXPECT_TRUE(close(dinp.gpu_f(), dinp.cpu_f(), kOutputTol<T>));
    // In place (out aliases a), as the residual stream uses it.
    auto a = this->both(random_t<T>(n, 42)), b = this->both(random_t<T>(n, 43));
    this->gl().add(a.gpu(), a.gpu(), b.gpu(), n);
    this->cl().add(a.cpu(), a.cpu(), b.cpu(), n);
    EXPECT_TRUE(close(a.gpu_f(), a.cpu_f(), {0, 0}));
  }
}

// Dropout draws the cpu backend's masks and gives its bits (the same multiply, one rounding),
// over rows that are and are not a multiple of a draw's four elements, in place too.
TYPED_TEST(CudaLayersTest, DropoutGivesTheCpuBackendsBits) {
  using T = TypeParam;
  const std::tuple<int, int, int> shapes[] = {{3, 5, 7}, {2, 64, 768}, {4, 1024, 768}};
  for (const auto& [B, Tn, C] : shapes) {
    SCOPED_TRACE(std::to_string(B) + " x " + std::to_string(Tn) + " x " + std::to_string(C));
    const size_t n = static_cast<size_t>(B) * Tn * C;
    DropoutKey key = dropout_key(0.1);
    key.seed = 1337;
    key.first_sample = 123456;
    key.site = 7;
    auto x = this->both(random_t<T>(n, 60)), out = this->both(std::vector<T>(n));
    this->gl().dropout(out.gpu(), x.gpu(), key, B, Tn, C);
    this->cl().dropout(out.cpu(), x.cpu(), key, B, Tn, C);
    EXPECT_TRUE(close(out.gpu_f(), out.cpu_f(), {0, 0}));
    this->gl().dropout(x.gpu(), x.gpu(), key, B, Tn, C);
    EXPECT_TRUE(close(x.gpu_f(), out.cpu_f(), {0, 0})) << "in place";
  }
}

TYPED_TEST(CudaLayersTest, CrossEntropy) {
  using T = TypeParam;
  for (int V : {5, 1000, 50257}) {
    SCOPED_TRACE(V);
    const int N = 9;
    std::vector<int> t = random_ints(N, 50, 0, V - 1);
    t[2] = -1;  // ignored
    t[7] = -100;
    auto targets = this->both(t);
    auto logits = this->both(random_t<T>(static_cast<size_t>(N) * V, 51, -4.0f, 4.0f));
    const double lg = this->gl().cross_entropy_forward(logits.gpu(), targets.gpu(), N, V);
    const double lc = this->cl().cross_entropy_forward(logits.cpu(), targets.cpu(), N, V);
    EXPECT_NEAR(lg, lc, 1e-5 * std::fabs(lc));
    const double bg =
        this->gl().cross_entropy_forward_backward(logits.gpu(), targets.gpu(), N, V, 0.25f);
    const double bc =
        this->cl().cross_entropy_forward_backward(logits.cpu(), targets.cpu(), N, V, 0.25f);
    EXPECT_NEAR(bg, bc, 1e-5 * std::fabs(bc));
    EXPECT_NEAR(bg, lg, 1e-12 * std::fabs(lg));
    EXPECT_TRUE(close(logits.gpu_f(), logits.cpu_f(), kOutputTol<T>));
  }
}

// The row kept in shared memory (RM_CUDA_CE_ROW_IN_SMEM=1) against the row read again from
// global memory: the same loss and dlogits to the bit, padding columns and ignored rows
// included -- at GPT-2's padded rows (50257 of 50304), rows that are whole vectors, and a
// length that takes the scalar kernel either way.
TYPED_TEST(CudaLayersTest, CrossEntropyRowInSharedMemoryGivesTheSameBits) {
  using T = TypeParam;
  const cudaStream_t stream = static_cast<cudaStream_t>(this->gpu().stream());
  for (auto [V, ld] :
       {std::pair{50257, 50304}, std::pair{1000, 1000}, std::pair{200, 256}, std::pair{13, 13}}) {
    SCOPED_TRACE(::testing::Message() << "V " << V << " ld " << ld);
    const int N = 33;
    std::vector<int> t = random_ints(N, 54, 0, V - 1);
    t[3] = -1;  // ignored
    auto targets = this->both(t);
    const std::vector<T> host = random_t<T>(static_cast<size_t>(N) * ld, 55, -4.0f, 4.0f);
    std::vector<std::vector<T>> dlogits;
    std::vector<double> losses;
    for (CrossEntropyRow row : {CrossEntropyRow::kReread, CrossEntropyRow::kInSharedMemory}) {
      auto logits = this->both(host);
      auto status = this->both(std::vector<double>(2));  // a CrossEntropyStatus
      auto row_loss = this->both(std::vector<double>(N));
      auto* st = reinterpret_cast<CrossEntropyStatus*>(status.gpu());
      cross_entropy_forward_backward(st, row_loss.gpu(), logits.gpu(), targets.gpu(), N, V, ld,
                                     0.25f, stream, row);
      dlogits.push_back(logits.gpu_host());
      losses.push_back(status.gpu_host()[0]);
    }
    EXPECT_EQ(losses[0], losses[1]);
    EXPECT_GT(losses[0], 0.0);
    ASSERT_EQ(dlogits[0].size(), dlogits[1].size());
    EXPECT_EQ(std::memcmp(dlogits[0].data(), dlogits[1].data(), dlogits[0].size() * sizeof(T)), 0);
  }
}

TYPED_TEST(CudaLayersTest, CrossEntropyRejectsTargetsOutOfRangeBeforeWriting) {
  using T = TypeParam;
  const int N = 4, V = 10;
  auto targets = this->both(std::vector<int>{1, 2, 10, 3});
  const std::vector<T> host = random_t<T>(N * V, 60);
  auto logits = this->both(host);
  EXPECT_THROW(this->gl().cross_entropy_forward_backward(logits.gpu(), targets.gpu(), N, V, 1.0f),
               std::out_of_range);
  const std::vector<T> after = logits.gpu_host();
  EXPECT_EQ(std::memcmp(after.data(), host.data(), host.size() * sizeof(T)), 0);
  // The backend is usable afterwards.
  auto ok = this->both(std::vector<int>{1, 2, 9, 3});
  EXPECT_NO_THROW(this->gl().cross_entropy_forward(logits.gpu(), ok.gpu(), N, V));
}

// The queued form: two calls, one read; the total is the two immediate sums added in call order,
// the dlogits the same bits, and a bad target is thrown by the read, which resets the total.
// queue_loss_copy leaves the total on the device (NaN after a bad target) and keeps it.
TYPED_TEST(CudaLayersTest, QueuedCrossEntropyAddsTheCallsAndReadsOnce) {
  using T = TypeParam;
  const int N = 24, V = 40;
  auto targets = this->both(random_ints(N, 52, 0, V - 1));
  const std::vector<T> host = random_t<T>(static_cast<size_t>(N) * V, 53, -4.0f, 4.0f);
  auto queued = this->both(host);
  auto direct = this->both(host);
  this->gl().queue_cross_entropy_forward_backward(queued.gpu(), targets.gpu(), N, V, 0.5f);
  this->gl().queue_cross_entropy_forward_backward(queued.gpu(), targets.gpu(), N, V, 0.5f);
  auto copied = this->both(std::vector<double>{-1.0});
  this->gl().queue_loss_copy(copied.gpu());  // the step guard's copy: on the device, kept
  const double total = this->gl().take_queued_loss();
  EXPECT_EQ(copied.gpu_host()[0], total);
  double want = this->gl().cross_entropy_forward_backward(direct.gpu(), targets.gpu(), N, V, 0.5f);
  want += this->gl().cross_entropy_forward_backward(direct.gpu(), targets.gpu(), N, V, 0.5f);
  EXPECT_EQ(total, want);
  const std::vector<T> a = queued.gpu_host(), b = direct.gpu_host();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0);
  EXPECT_EQ(this->gl().take_queued_loss(), 0.0);  // taken, so reset

  auto bad = this->both(std::vector<int>(N, V));  // every target out of range
  this->gl().queue_cross_entropy_forward_backward(queued.gpu(), bad.gpu(), N, V, 0.5f);
  this->gl().queue_loss_copy(copied.gpu());
  EXPECT_TRUE(std::isnan(copied.gpu_host()[0])) << "a bad target must stop the step's update";
  EXPECT_THROW(this->gl().take_queued_loss(), std::out_of_range);
  EXPECT_EQ(this->gl().take_queued_loss(), 0.0);
}

// The classifier in one call pads the vocabulary on cuda (200 -> 256 columns here): the loss,
// dinp and dwte are those of the unpadded three calls -- on the cpu, whose default is those
// calls, and on the GPU itself -- and a bad target is still thrown by the read.
TYPED_TEST(CudaLayersTest, ClassifierPadsTheVocabularyAndMatchesTheThreeCalls) {
  using T = TypeParam;
  const int N = 37, C = 48, V = 200;
  ASSERT_EQ(this->gl().classifier_scratch_elements(N, C, V), size_t{N} * 256 + 256 * C);
  ASSERT_EQ(this->cl().classifier_scratch_elements(N, C, V), size_t{N} * V);
  std::vector<int> t = random_ints(N, 70, 0, V - 1);
  t[5] = -1;  // ignored
  t[6] = V - 1;
  auto targets = this->both(t);
  auto inp = this->both(random_t<T>(static_cast<size_t>(N) * C, 71, -2.0f, 2.0f));
  auto wte = this->both(random_t<T>(static_cast<size_t>(V) * C, 72, -2.0f, 2.0f));
  const size_t scratch_n = this->gl().classifier_scratch_elements(N, C, V);
  // NaN-filled scratch: nothing may depend on what it held.
  auto scratch = this->both(std::vector<T>(scratch_n, store<T>(std::nanf(""))));
  auto dinp = this->both(random_t<T>(static_cast<size_t>(N) * C, 73));  // overwritten
  const std::vector<float> dwte0 = random_floats(static_cast<size_t>(V) * C, 74);
  auto dwte = this->both(dwte0);
  this->gl().queue_classifier_forward_backward(dinp.gpu(), dwte.gpu(), scratch.gpu(), inp.gpu(),
                                               wte.gpu(), targets.gpu(), N, C, V, 0.5f);
  this->cl().queue_classifier_forward_backward(dinp.cpu(), dwte.cpu(), scratch.cpu(), inp.cpu(),
                                               wte.cpu(), targets.cpu(), N, C, V, 0.5f);
  const double lg = this->gl().take_queued_loss(), lc = this->cl().take_queued_loss();
  EXPECT_NEAR(lg, lc, 1e-3 * std::fabs(lc));  // bf16 logits rounded in other sums
  EXPECT_TRUE(close(dinp.gpu_f(), dinp.cpu_f(), kOutputTol<T>));
  EXPECT_TRUE(close(dwte.gpu_f(), dwte.cpu_f(), kGradTol<T>));

  // The GPU's own unpadded calls give the same, within the GEMMs' summation order.
  auto logits = this->both(std::vector<T>(static_cast<size_t>(N) * V));
  auto dinp3 = this->both(std::vector<T>(static_cast<size_t>(N) * C));
  auto dwte3 = this->both(dwte0);
  this->gl().linear_forward(logits.gpu(), inp.gpu(), wte.gpu(), nullptr, N, C, V);
  this->gl().queue_cross_entropy_forward_backward(logits.gpu(), targets.gpu(), N, V, 0.5f);
  this->gl().linear_backward(dinp3.gpu(), dwte3.gpu(), nullptr, logits.gpu(), inp.gpu(), wte.gpu(),
                             N, C, V);
  EXPECT_NEAR(this->gl().take_queued_loss(), lg, 1e-6 * std::fabs(lg));
  EXPECT_TRUE(close(dinp.gpu_f(), dinp3.gpu_f(), kOutputTol<T>));
  EXPECT_TRUE(close(dwte.gpu_f(), dwte3.gpu_f(), kGradTol<T>));

  auto bad = this->both(std::vector<int>(N, V));
  this->gl().queue_classifier_forward_backward(dinp.gpu(), dwte.gpu(), scratch.gpu(), inp.gpu(),
                                               wte.gpu(), bad.gpu(), N, C, V, 0.5f);
  EXPECT_THROW(this->gl().take_queued_loss(), std::out_of_range);
  EXPECT_EQ(this->gl().take_queued_loss(), 0.0);
}

// model.classifier_chunk_tokens as GptModel::backward calls it: rows of 16 at a time (16, 16,
// 5), each call offset into inp, dinp and the targets and given a scratch of 16 rows, dwte
// accumulated across the calls, the chunks after the first with same_wte (the padded copy of
// wte made once). The loss, dinp and dwte are the whole call's, within the GEMMs' summation
// order; same_wte after a call with another wte is refused before anything is queued.
TYPED_TEST(CudaLayersTest, ClassifierInRowChunksMatchesTheWholeCall) {
  using T = TypeParam;
  const int N = 37, C = 48, V = 200, rows = 16;
  auto targets = this->both(random_ints(N, 80, 0, V - 1));
  auto inp = this->both(random_t<T>(static_cast<size_t>(N) * C, 81, -2.0f, 2.0f));
  auto wte = this->both(random_t<T>(static_cast<size_t>(V) * C, 82, -2.0f, 2.0f));
  const std::vector<float> dwte0 = random_floats(static_cast<size_t>(V) * C, 83);
  auto dwte_whole = this->both(dwte0), dwte_chunks = this->both(dwte0);
  auto dinp_whole = this->both(std::vector<T>(static_cast<size_t>(N) * C));
  auto dinp_chunks = this->both(std::vector<T>(static_cast<size_t>(N) * C));
  auto scratch_whole = this->both(std::vector<T>(this->gl().classifier_scratch_elements(N, C, V)));
  const size_t chunk_n = this->gl().classifier_scratch_elements(rows, C, V);
  ASSERT_LT(chunk_n, this->gl().classifier_scratch_elements(N, C, V));
  auto scratch_chunk = this->both(std::vector<T>(chunk_n, store<T>(std::nanf(""))));
  this->gl().queue_classifier_forward_backward(dinp_whole.gpu(), dwte_whole.gpu(),
                                               scratch_whole.gpu(), inp.gpu(), wte.gpu(),
                                               targets.gpu(), N, C, V, 0.5f);
  const double whole = this->gl().take_queued_loss();
  for (int r0 = 0; r0 < N; r0 += rows) {
    const int n = std::min(rows, N - r0);
    const size_t at = static_cast<size_t>(r0) * C;
    this->gl().queue_classifier_forward_backward(dinp_chunks.gpu() + at, dwte_chunks.gpu(),
                                                 scratch_chunk.gpu(), inp.gpu() + at, wte.gpu(),
                                                 targets.gpu() + r0, n, C, V, 0.5f, r0 > 0);
  }
  const double chunks = this->gl().take_queued_loss();
  EXPECT_NEAR(chunks, whole, 1e-6 * std::fabs(whole));
  EXPECT_TRUE(close(dinp_chunks.gpu_f(), dinp_whole.gpu_f(), kOutputTol<T>));
  EXPECT_TRUE(close(dwte_chunks.gpu_f(), dwte_whole.gpu_f(), kGradTol<T>));

  auto other_wte = this->both(random_t<T>(static_cast<size_t>(V) * C, 84));
  const std::vector<float> dwte_before = dwte_chunks.gpu_f();
  EXPECT_THROW(this->gl().queue_classifier_forward_backward(
                   dinp_chunks.gpu(), dwte_chunks.gpu(), scratch_chunk.gpu(), inp.gpu(),
                   other_wte.gpu(), targets.gpu(), rows, C, V, 0.5f, true),
               std::logic_error);
  EXPECT_EQ(dwte_chunks.gpu_f(), dwte_before);
}

// ---- Flash attention (bf16) -------------------------------------------------------------------
//
// The bf16 layers take the flash kernels (flash_attention.h) for head sizes that are multiples of
// 16; they are compared with the materialised cuBLAS path (cuda/attention.h, called directly on
// its own context: verified on a GPU by CudaLayersTest.Attention) and with the cpu backend's bf16
// emulation. Tolerances, for both comparisons, out and dqkv alike:
//  - elementwise |got - want| <= 2e-2 max|want| + 2e-2 |want|: bf16 outputs (2^-9 relative),
//    P and dS rounded to bf16 before their products (the materialised path rounds att and dpre
//    the same way but in other places; the cpu emulation keeps them in float), D = rowsum(dO O)
//    from the bf16 O (the reference forms <att, datt> in float);
//  - and the relative RMS error ||got - want|| / ||want|| <= 1e-2, so that a tile or mask error
//    (an O(1) error on a few rows) cannot hide below the elementwise bound.
// These bounds are reasoned, not yet measured; a failure prints both figures.

::testing::AssertionResult close_rms(const std::vector<float>& got, const std::vector<float>& want,
                                     double max_rms) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  const double rms = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
  if (rms <= max_rms) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative RMS error " << rms << " > " << max_rms;
}

void expect_flash_close(const std::vector<float>& got, const std::vector<float>& want,
                        const char* what) {
  EXPECT_TRUE(close(got, want, {2e-2, 2e-2})) << what;
  EXPECT_TRUE(close_rms(got, want, 1e-2)) << what;
}

struct FlashShape {
  int B, Tn, C, H;
  bool with_cpu;  // also against the cpu backend (slow at the largest shapes)
};

class FlashAttentionTest : public CudaTest {
 protected:
  // The layers run the flash kernels here: cuDNN's attention is the default for bf16 (read at a
  // context's first attention call), and these tests are the flash kernels' -- their row
  // fragments take the layers' saved statistics, which only the flash forward writes (base 2).
  const testutil::ScopedEnv flash_{"RM_CUDNN_ATTENTION", "0"};

  // Runs the bf16 layers (flash) and the materialised path on the same inputs; compares each with
  // the other and, if asked, with the cpu backend.
  void check(const FlashShape& s) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << s.B << " T " << s.Tn << " C " << s.C << " H " << s.H);
    const int B = s.B, Tn = s.Tn, C = s.C, H = s.H;
    LayerKernels<bf16>& gl = gpu().layers<bf16>();
    const AttentionBuffers buf = gl.attention_buffers(B, Tn, C, H);
    ASSERT_EQ(buf.saved, flash_attention_buffers(B, Tn, H).saved) << "flash is not selected";
    ASSERT_EQ(buf.scratch, flash_attention_buffers(B, Tn, H).scratch);
    const size_t NC = static_cast<size_t>(B) * Tn * C, A = static_cast<size_t>(B) * H * Tn * Tn;
    const unsigned seed = static_cast<unsigned>(B * 1000003 + Tn * 101 + C + H);
    auto qkv = both(random_t<bf16>(3 * NC, seed, -2.0f, 2.0f));
    auto dout = both(random_t<bf16>(NC, seed + 1));

    // Flash, through the layers as the model calls them.
    DeviceArray<bf16> out(gpu(), NC), lse(gpu(), buf.saved), scratch(gpu(), buf.scratch);
    DeviceArray<bf16> dqkv(gpu(), 3 * NC);
    gl.attention_forward(out.data(), lse.data(), qkv.gpu(), B, Tn, C, H);
    gl.attention_backward(dqkv.data(), scratch.data(), dout.gpu(), qkv.gpu(), lse.data(),
                          out.data(), B, Tn, C, H);
    const std::vector<float> f_out = download_f(gpu(), out), f_dqkv = download_f(gpu(), dqkv);
    // Deterministic: a second run gives the same bits.
    gl.attention_forward(out.data(), lse.data(), qkv.gpu(), B, Tn, C, H);
    gl.attention_backward(dqkv.data(), scratch.data(), dout.gpu(), qkv.gpu(), lse.data(),
                          out.data(), B, Tn, C, H);
    EXPECT_EQ(download_f(gpu(), out), f_out);
    EXPECT_EQ(download_f(gpu(), dqkv), f_dqkv);
    // The dK/dV and dQ kernels with one and (where the head size takes it) two row fragments a
    // warp: the same bits as the layers' call, every element written (dqkv starts as NaNs).
    const int most = flash_backward_max_fragments(C / H);
    for (int dkv = 1; dkv <= most; ++dkv) {
      for (int dq = 1; dq <= most; ++dq) {
        SCOPED_TRACE(::testing::Message() << "row fragments a warp: dK/dV " << dkv << " dQ " << dq);
        const std::vector<unsigned char> nans(3 * NC * sizeof(bf16), 0xff);
        gpu().upload(dqkv.data(), nans.data(), nans.size());
        flash_attention_backward(dqkv.data(), scratch.data(), dout.gpu(), qkv.gpu(), lse.data(),
                                 out.data(), B, Tn, C, H, static_cast<cudaStream_t>(gpu().stream()),
                                 {dkv, dq});
        EXPECT_EQ(download_f(gpu(), dqkv), f_dqkv);
      }
    }

    // The materialised path on its own context (stream), the same device memory.
    {
      DeviceArray<bf16> m_out(gpu(), NC), att(gpu(), A), datt(gpu(), A), m_dqkv(gpu(), 3 * NC);
      gpu().synchronize();
      CudaContext ctx(0, /*allow_tf32=*/false);
      float* scores = ctx.attention_scratch(attention_scratch_floats<bf16>(Tn, H));
      attention_forward(ctx.blas(), m_out.data(), att.data(), qkv.gpu(), B, Tn, C, H, scores,
                        ctx.stream());
      attention_backward(ctx.blas(), m_dqkv.data(), datt.data(), dout.gpu(), qkv.gpu(), att.data(),
                         B, Tn, C, H, scores, ctx.stream());
      ASSERT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
      const std::vector<float> m_o = download_f(gpu(), m_out), m_d = download_f(gpu(), m_dqkv);
      expect_flash_close(f_out, m_o, "out vs materialised");
      expect_flash_close(f_dqkv, m_d, "dqkv vs materialised");
    }
    if (!s.with_cpu) return;
    LayerKernels<bf16>& cl = cpu().layers<bf16>();
    const AttentionBuffers cbuf = cl.attention_buffers(B, Tn, C, H);
    ASSERT_EQ(cbuf.saved, A);
    DeviceArray<bf16> c_out(cpu(), NC), c_att(cpu(), cbuf.saved), c_scr(cpu(), cbuf.scratch);
    DeviceArray<bf16> c_dqkv(cpu(), 3 * NC);
    cl.attention_forward(c_out.data(), c_att.data(), qkv.cpu(), B, Tn, C, H);
    cl.attention_backward(c_dqkv.data(), c_scr.data(), dout.cpu(), qkv.cpu(), c_att.data(),
                          c_out.data(), B, Tn, C, H);
    const std::vector<float> c_o = download_f(cpu(), c_out), c_d = download_f(cpu(), c_dqkv);
    expect_flash_close(f_out, c_o, "out vs cpu");
    expect_flash_close(f_dqkv, c_d, "dqkv vs cpu");
  }

  // The bf16 layers' forward and backward on `c` (memory of c's device), synchronised: out, dqkv.
  static std::pair<std::vector<float>, std::vector<float>> through_layers(Compute& c,
                                                                          const bf16* qkv,
                                                                          const bf16* dout,
                                                                          const FlashShape& s) {
    LayerKernels<bf16>& l = c.layers<bf16>();
    const AttentionBuffers buf = l.attention_buffers(s.B, s.Tn, s.C, s.H);
    const size_t NC = static_cast<size_t>(s.B) * s.Tn * s.C;
    DeviceArray<bf16> out(c, NC), saved(c, buf.saved), scratch(c, buf.scratch), dqkv(c, 3 * NC);
    l.attention_forward(out.data(), saved.data(), qkv, s.B, s.Tn, s.C, s.H);
    l.attention_backward(dqkv.data(), scratch.data(), dout, qkv, saved.data(), out.data(), s.B,
                         s.Tn, s.C, s.H);
    std::pair<std::vector<float>, std::vector<float>> r{download_f(c, out), download_f(c, dqkv)};
    c.synchronize();
    return r;
  }

  static std::vector<float> download_f(Compute& c, const DeviceArray<bf16>& a) {
    std::vector<bf16> h(a.size());
    c.download(h.data(), a.data(), h.size() * sizeof(bf16));
    return widen(h);
  }
};

TEST_F(FlashAttentionTest, SmallShapesAndTileEdges) {
  // hs 64 (GPT-2); T below, at, across and far from the 64-row tile edge.
  for (int Tn : {1, 17, 64, 65, 127, 200}) check({2, Tn, 256, 4, true});
}

TEST_F(FlashAttentionTest, OtherHeadSizes) {
  check({2, 100, 64, 4, true});   // hs 16
  check({3, 70, 384, 4, true});   // hs 96
  check({2, 130, 512, 4, true});  // hs 128
}

TEST_F(FlashAttentionTest, Gpt2Shapes) {
  check({2, 1024, 768, 12, true});   // against the cpu too
  check({4, 1000, 768, 12, false});  // T not a multiple of the tile
  check({4, 1024, 768, 12, false});
}

TEST_F(FlashAttentionTest, RejectsMisalignedBuffers) {
  const int B = 1, Tn = 8, C = 64, H = 1;
  DeviceArray<bf16> qkv(gpu(), 3 * B * Tn * C + 8), out(gpu(), B * Tn * C), lse(gpu(), 64);
  EXPECT_THROW(flash_attention_forward(out.data(), lse.data(), qkv.data() + 1, B, Tn, C, H,
                                       static_cast<cudaStream_t>(gpu().stream())),
               std::invalid_argument);
  EXPECT_THROW(flash_attention_forward(out.data(), lse.data(), qkv.data(), B, Tn, 48, 4,
                                       static_cast<cudaStream_t>(gpu().stream())),
               std::invalid_argument);  // hs 12
}

TEST_F(FlashAttentionTest, RejectsRowFragmentsTheHeadSizeDoesNotTake) {
  const int B = 1, Tn = 8, H = 1;
  for (int C : {64, 128}) {  // two fragments a warp up to head size 64 only
    DeviceArray<bf16> qkv(gpu(), 3 * B * Tn * C), out(gpu(), B * Tn * C), dout(gpu(), B * Tn * C);
    DeviceArray<bf16> dqkv(gpu(), 3 * B * Tn * C), lse(gpu(), 64), scratch(gpu(), 64);
    for (int n : {-1, 3, C == 128 ? 2 : 3}) {
      for (FlashBackwardFragments f :
           {FlashBackwardFragments{n, 1}, FlashBackwardFragments{1, n}}) {
        EXPECT_THROW(flash_attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                                              lse.data(), out.data(), B, Tn, C, H,
                                              static_cast<cudaStream_t>(gpu().stream()), f),
                     std::invalid_argument)
            << "C " << C << " dK/dV " << f.dkv << " dQ " << f.dq;
      }
    }
  }
}

#if RM_HAVE_CUDNN
// cuDNN's fused attention (cudnn_sdpa.h) against the flash kernels (the layers with
// RM_CUDNN_ATTENTION=0, the fixture's): the deterministic backward at three shapes, its reruns
// giving the same bits; the accumulating one at GPT-2's, run twice; at the smallest, the cpu
// backend too, and the layers of a context made with the switch at its default (unset: the same
// bits as the direct calls). Ten plans, each a runtime compilation: the test takes seconds.
TEST_F(FlashAttentionTest, CudnnAttentionMatchesTheFlashKernels) {
  for (const FlashShape& s : {FlashShape{2, 64, 256, 4, true}, FlashShape{2, 1024, 768, 12, false},
                              FlashShape{4, 1000, 768, 12, false}}) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << s.B << " T " << s.Tn << " C " << s.C << " H " << s.H);
    const int B = s.B, Tn = s.Tn, C = s.C, H = s.H;
    const AttentionBuffers buf = gpu().layers<bf16>().attention_buffers(B, Tn, C, H);
    const size_t NC = static_cast<size_t>(B) * Tn * C;
    auto qkv = both(random_t<bf16>(3 * NC, 31 + Tn, -2.0f, 2.0f));
    auto dout = both(random_t<bf16>(NC, 32 + Tn));
    const auto [f_out, f_dqkv] = through_layers(gpu(), qkv.gpu(), dout.gpu(), s);
    std::vector<float> det_out, det_dqkv;
    for (bool deterministic : {true, false}) {
      if (!deterministic && Tn != 1024) continue;
      SCOPED_TRACE(deterministic ? "deterministic backward" : "dQ accumulated");
      CudaContext ctx(0, /*allow_tf32=*/false);
      CudnnAttention cudnn(ctx.stream(), deterministic);
      ASSERT_TRUE(cudnn.takes(B, Tn, C, H)) << "cuDNN refused the shape (see stderr)";
      DeviceArray<bf16> c_out(gpu(), NC), c_stats(gpu(), buf.saved), c_sum(gpu(), buf.scratch);
      DeviceArray<bf16> c_dqkv(gpu(), 3 * NC);
      auto run = [&] {
        ASSERT_TRUE(cudnn.forward(c_out.data(), reinterpret_cast<float*>(c_stats.data()), qkv.gpu(),
                                  B, Tn, C, H));
        cudnn.backward(c_dqkv.data(), reinterpret_cast<float*>(c_sum.data()), dout.gpu(), qkv.gpu(),
                       reinterpret_cast<const float*>(c_stats.data()), c_out.data(), B, Tn, C, H);
        ASSERT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
      };
      run();
      const std::vector<float> o = download_f(gpu(), c_out), d = download_f(gpu(), c_dqkv);
      expect_flash_close(o, f_out, "cuDNN out vs flash");
      expect_flash_close(d, f_dqkv, "cuDNN dqkv vs flash");
      if (deterministic) {
        run();
        EXPECT_EQ(download_f(gpu(), c_out), o);
        EXPECT_EQ(download_f(gpu(), c_dqkv), d);
        det_out = o;
        det_dqkv = d;
      } else {
        // Again: dQ's accumulator is cleared before each backward, or the second dQ carries the
        // first one's in (once, on fresh memory, it is usually zero already).
        run();
        expect_flash_close(download_f(gpu(), c_dqkv), f_dqkv, "cuDNN dqkv vs flash, run twice");
      }
    }
    if (!s.with_cpu) continue;
    const auto [c_out, c_dqkv] = through_layers(cpu(), qkv.cpu(), dout.cpu(), s);
    expect_flash_close(det_out, c_out, "cuDNN out vs cpu");
    expect_flash_close(det_dqkv, c_dqkv, "cuDNN dqkv vs cpu");
    // Through the layers of a compute made with the switch at its default (another context on
    // the same device: the inputs above serve). It is read at the context's first attention call.
    std::pair<std::vector<float>, std::vector<float>> layers;
    {
      const testutil::ScopedEnv by_default("RM_CUDNN_ATTENTION", nullptr);
      std::unique_ptr<Compute> switched = make_cuda_compute(0, /*allow_tf32=*/false);
      layers = through_layers(*switched, qkv.gpu(), dout.gpu(), s);
    }
    EXPECT_EQ(layers.first, det_out) << "the layers did not take cuDNN by default";
    EXPECT_EQ(layers.second, det_dqkv);
  }
}
#endif

// ---- Compute: memory, GEMM, optimizer, reductions, casts ---------------------------------------

// GPT-2 124M's MLP and qkv shapes (width 768) in bf16: every call takes cuBLASLt's fused
// epilogues (no fallback), agrees with the unfused path (a cuBLAS GEMM, then the bias-rows and
// GELU kernels) and gives the same bits when run again.
TEST_F(CudaTest, GemmEpiloguesRunFusedAtGpt2Shapes) {
  const int N = 512, C = 768, F = 4 * C;
  const auto up = [&](size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    auto a = std::make_unique<DeviceArray<bf16>>(gpu(), n);
    const std::vector<bf16> h = random_t<bf16>(n, seed, lo, hi);
    gpu().upload(a->data(), h.data(), n * sizeof(bf16));
    return a;
  };
  const auto down = [&](const DeviceArray<bf16>& a) {
    std::vector<bf16> h(a.size());
    gpu().download(h.data(), a.data(), h.size() * sizeof(bf16));
    return widen(h);
  };
  const auto down_f = [&](const DeviceArray<float>& a) {
    std::vector<float> h(a.size());
    gpu().download(h.data(), a.data(), h.size() * sizeof(float));
    return h;
  };
  auto x = up(static_cast<size_t>(N) * C, 60),
       w_fc = up(static_cast<size_t>(F) * C, 61, -0.1f, 0.1f);
  auto b_fc = up(F, 62), w_proj = up(static_cast<size_t>(C) * F, 63, -0.05f, 0.05f);
  auto dout = up(static_cast<size_t>(N) * C, 64);
  DeviceArray<bf16> out(gpu(), static_cast<size_t>(N) * F), pre(gpu(), static_cast<size_t>(N) * F);
  DeviceArray<bf16> out_u(gpu(), out.size()), pre_u(gpu(), pre.size());
  DeviceArray<bf16> dpre(gpu(), pre.size()), dpre_u(gpu(), pre.size());
  DeviceArray<float> dw(gpu(), static_cast<size_t>(C) * F), dw_u(gpu(), dw.size());
  DeviceArray<float> db(gpu(), C), db_u(gpu(), C);
  gpu().synchronize();

  CudaContext ctx(0, /*allow_tf32=*/false);
  float* scratch = ctx.column_scratch(linear_scratch_floats(N, C));
  const auto fused = [&] {
    ctx_zero(dw.data(), dw.size() * sizeof(float), ctx.stream());
    ctx_zero(db.data(), db.size() * sizeof(float), ctx.stream());
    linear_gelu_forward(ctx.blas(), &ctx.lt(), out.data(), pre.data(), x->data(), w_fc->data(),
                        b_fc->data(), N, C, F, ctx.stream());
    linear_backward_into_gelu(ctx.blas(), &ctx.lt(), dpre.data(), dw.data(), db.data(),
                              dout->data(), out.data(), w_proj->data(), pre.data(), N, F, C,
                              scratch, ctx.stream());
    ASSERT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
  };
  fused();
  EXPECT_EQ(ctx.lt().fallbacks(), 0) << "cuBLASLt offered no fused matmul for a GPT-2 shape";
  EXPECT_EQ(ctx.lt().plans(), 2u);  // GELU_AUX_BIAS, DGELU (the bias gradient: bias_gradient.h)
  // The unfused path on the same context: no cuBLASLt.
  ctx_zero(dw_u.data(), dw_u.size() * sizeof(float), ctx.stream());
  ctx_zero(db_u.data(), db_u.size() * sizeof(float), ctx.stream());
  linear_gelu_forward(ctx.blas(), nullptr, out_u.data(), pre_u.data(), x->data(), w_fc->data(),
                      b_fc->data(), N, C, F, ctx.stream());
  // The backward from the fused forward's out and pre, so that only the backward differs.
  linear_backward_into_gelu(ctx.blas(), nullptr, dpre_u.data(), dw_u.data(), db_u.data(),
                            dout->data(), out.data(), w_proj->data(), pre.data(), N, F, C, scratch,
                            ctx.stream());
  ASSERT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
  const std::vector<float> f_out = down(out), f_pre = down(pre), f_dpre = down(dpre);
  const std::vector<float> f_dw = down_f(dw), f_db = down_f(db);
  EXPECT_TRUE(close(f_pre, down(pre_u), kOutputTol<bf16>));
  EXPECT_TRUE(close(f_out, down(out_u), kOutputTol<bf16>));
  EXPECT_TRUE(close(f_dpre, down(dpre_u), kOutputTol<bf16>));
  EXPECT_TRUE(close(f_dw, down_f(dw_u), kGradTol<bf16>));
  EXPECT_TRUE(close(f_db, down_f(db_u), kGradTol<bf16>));
  fused();  // again: the kept plans, the same bits
  EXPECT_EQ(ctx.lt().plans(), 2u);
  EXPECT_EQ(down(out), f_out);
  EXPECT_EQ(down(dpre), f_dpre);
  EXPECT_EQ(down_f(dw), f_dw);
  EXPECT_EQ(down_f(db), f_db);
}

// The bias gradient on the context's side stream, beside the two GEMMs (gemm.h's SideStream),
// gives the bits of the same calls all on the compute stream, at GPT-2's MLP shapes, for both
// backwards; and a call right after it on the compute stream sees dbias complete.
TEST_F(CudaTest, BiasGradientBesideTheGemmsGivesTheSameBits) {
  const int N = 1024, C = 768, F = 4 * C;
  CudaContext ctx(0, /*allow_tf32=*/false);
  ASSERT_NE(ctx.bias_side(), nullptr) << "RM_CUDA_BIAS_STREAM=0 is set: nothing to test";
  const auto up = [&](size_t n, unsigned seed) {
    auto a = std::make_unique<DeviceArray<bf16>>(gpu(), n);
    const std::vector<bf16> h = random_t<bf16>(n, seed);
    gpu().upload(a->data(), h.data(), n * sizeof(bf16));
    return a;
  };
  auto x = up(static_cast<size_t>(N) * F, 70), w = up(static_cast<size_t>(C) * F, 71);
  auto dout = up(static_cast<size_t>(N) * C, 72), pre = up(static_cast<size_t>(N) * F, 73);
  DeviceArray<bf16> dinp(gpu(), static_cast<size_t>(N) * F);
  DeviceArray<float> dw(gpu(), static_cast<size_t>(C) * F), db(gpu(), C), copy(gpu(), C);
  gpu().synchronize();
  float* scratch = ctx.column_scratch(linear_scratch_floats(N, C));
  // One backward (into GELU or not) with or without the side stream; then dbias is copied on
  // the compute stream, which must come after the side stream's last write to it.
  const auto run = [&](bool gelu, const SideStream* side) {
    ctx_zero(dw.data(), dw.size() * sizeof(float), ctx.stream());
    ctx_zero(db.data(), db.size() * sizeof(float), ctx.stream());
    if (gelu) {
      linear_backward_into_gelu(ctx.blas(), &ctx.lt(), dinp.data(), dw.data(), db.data(),
                                dout->data(), x->data(), w->data(), pre->data(), N, F, C, scratch,
                                ctx.stream(), side);
    } else {
      linear_backward(ctx.blas(), &ctx.lt(), dinp.data(), dw.data(), db.data(), dout->data(),
                      x->data(), w->data(), N, F, C, scratch, ctx.stream(), side);
    }
    EXPECT_EQ(cudaMemcpyAsync(copy.data(), db.data(), C * sizeof(float), cudaMemcpyDeviceToDevice,
                              ctx.stream()),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
    std::vector<float> h_dw(dw.size()), h_db(C), h_copy(C);
    std::vector<bf16> h_dinp(dinp.size());
    gpu().download(h_dw.data(), dw.data(), h_dw.size() * sizeof(float));
    gpu().download(h_db.data(), db.data(), h_db.size() * sizeof(float));
    gpu().download(h_copy.data(), copy.data(), h_copy.size() * sizeof(float));
    gpu().download(h_dinp.data(), dinp.data(), h_dinp.size() * sizeof(bf16));
    return std::make_tuple(widen(h_dinp), h_dw, h_db, h_copy);
  };
  for (bool gelu : {false, true}) {
    SCOPED_TRACE(gelu ? "into gelu" : "plain");
    const auto [dinp_a, dw_a, db_a, copy_a] = run(gelu, nullptr);
    const auto [dinp_b, dw_b, db_b, copy_b] = run(gelu, ctx.bias_side());
    EXPECT_EQ(dinp_b, dinp_a);
    EXPECT_EQ(dw_b, dw_a);
    EXPECT_EQ(db_b, db_a);
    EXPECT_EQ(copy_b, db_a) << "the compute stream read dbias before the side stream wrote it";
    EXPECT_NE(db_a, std::vector<float>(C, 0.0f));
  }
}

TEST_F(CudaTest, DescribeAndStream) {
  EXPECT_EQ(gpu().kind(), ComputeKind::kCuda);
  EXPECT_TRUE(
      std::regex_match(gpu().describe(), std::regex(R"(cuda:0 .+ \(sm_[0-9]+, [0-9]+ GiB\))")))
      << gpu().describe();
  EXPECT_NE(gpu().stream(), nullptr);
}

TEST_F(CudaTest, MemoryIsZeroedAndCopiesRoundTrip) {
  const size_t n = 1 << 20;
  DeviceArray<float> a(gpu(), n), b(gpu(), n);
  std::vector<float> h(n, 1.0f);
  gpu().download(h.data(), a.data(), n * sizeof(float));
  EXPECT_TRUE(std::all_of(h.begin(), h.end(), [](float x) { return x == 0.0f; }));
  const std::vector<float> src = random_floats(n, 70);
  gpu().upload(a.data(), src.data(), n * sizeof(float));
  gpu().copy(b.data(), a.data(), n * sizeof(float));
  gpu().zero(a.data(), n / 2 * sizeof(float));
  gpu().download(h.data(), b.data(), n * sizeof(float));
  EXPECT_EQ(h, src);
  gpu().download(h.data(), a.data(), n * sizeof(float));
  EXPECT_EQ(h[n / 2 - 1], 0.0f);
  EXPECT_EQ(h[n / 2], src[n / 2]);
  // Pinned staging: upload from it, then download_async into it after queued work.
  auto* pinned = static_cast<float*>(gpu().allocate_host(n * sizeof(float)));
  EXPECT_EQ(pinned[n - 1], 0.0f);
  std::copy(src.begin(), src.end(), pinned);
  gpu().upload(a.data(), pinned, n * sizeof(float));
  std::fill(pinned, pinned + n, -1.0f);  // upload returned: the source may be reused
  gpu().scale(a.data(), n, 2.0f);        // queued before the download: must be seen by it
  gpu().download_async(pinned, a.data(), n * sizeof(float));
  gpu().downloads_fence()();
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(pinned[i], 2.0f * src[i]);
  gpu().release_host(pinned);
  gpu().release(nullptr);
  gpu().release_host(nullptr);
}

TEST_F(CudaTest, SgemmEveryTransposeWithLeadingDimensions) {
  const int M = 33, N = 17, K = 45;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      auto A = both(random_floats(static_cast<size_t>(ta ? K : M) * lda, 80));
      auto B = both(random_floats(static_cast<size_t>(tb ? N : K) * ldb, 81));
      auto C = both(random_floats(static_cast<size_t>(M) * ldc, 82));
      gpu().sgemm(ta, tb, M, N, K, 0.5f, A.gpu(), lda, B.gpu(), ldb, 0.25f, C.gpu(), ldc);
      cpu().sgemm(ta, tb, M, N, K, 0.5f, A.cpu(), lda, B.cpu(), ldb, 0.25f, C.cpu(), ldc);
      EXPECT_TRUE(close(C.gpu_f(), C.cpu_f(), {1e-4, 1e-5})) << ta << tb;
    }
  }
  auto x = both(std::vector<float>(16));
  EXPECT_THROW(gpu().sgemm(false, false, 4, 4, 4, 1.0f, x.gpu(), 3, x.gpu(), 4, 0.0f, x.gpu(), 4),
               std::invalid_argument);
}

TEST_F(CudaTest, Tf32GemmIsCloseToFp32) {
  auto tf32 = make_cuda_compute(0, /*allow_tf32=*/true);
  const int M = 64, N = 64, K = 256;
  const auto a = random_floats(M * K, 83), b = random_floats(K * N, 84);
  DeviceArray<float> A(*tf32, a.size()), B(*tf32, b.size()), C(*tf32, M * N);
  tf32->upload(A.data(), a.data(), a.size() * sizeof(float));
  tf32->upload(B.data(), b.data(), b.size() * sizeof(float));
  tf32->sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
  std::vector<float> got(M * N), want(M * N);
  tf32->download(got.data(), C.data(), got.size() * sizeof(float));
  cpu().sgemm(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, want.data(), N);
  EXPECT_TRUE(close(got, want, {1e-2, 5e-3}));  // TF32: 10-bit mantissa inputs
}

TEST_F(CudaTest, AdamW) {
  const size_t n = 100003;
  auto p = both(random_floats(n, 90)), m = both(std::vector<float>(n)),
       v = both(std::vector<float>(n));
  for (int t = 1; t <= 3; ++t) {
    auto g = both(random_floats(n, 91 + t, -2.0f, 2.0f));
    gpu().adamw_update(p.gpu(), g.gpu(), m.gpu(), v.gpu(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t,
                       0.5f);
    cpu().adamw_update(p.cpu(), g.cpu(), m.cpu(), v.cpu(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t,
                       0.5f);
  }
  EXPECT_TRUE(close(p.gpu_f(), p.cpu_f(), {1e-6, 1e-7}));
  EXPECT_TRUE(close(m.gpu_f(), m.cpu_f(), {1e-6, 1e-7}));
  EXPECT_TRUE(close(v.gpu_f(), v.cpu_f(), {1e-6, 1e-7}));
  EXPECT_THROW(gpu().adamw_update(p.gpu(), p.gpu(), m.gpu(), v.gpu(), n, 1e-2f, 0.9f, 0.95f, 1e-8f,
                                  0.1f, 0, 1.0f),
               std::invalid_argument);
}

// One launch over many ranges (the optimizer's shard): the update of one adamw_update per range
// on the GPU itself, to an ulp (the two kernels are compiled apart, and nvcc may contract the
// element's multiply-adds differently: an H200 run found 1-ulp differences in half the
// elements), gaps between ranges untouched; the table is re-uploaded when the ranges change (the
// second round), and the step is checked.
TEST_F(CudaTest, AdamWRangesMatchOneCallPerRange) {
  const size_t n = 200000;
  const std::vector<float> p0 = random_floats(n, 95);
  auto p = both(p0), m = both(random_floats(n, 96, 0.0f, 0.1f)),
       v = both(random_floats(n, 97, 0.0f, 0.1f));
  auto p1 = both(p.gpu_host()), m1 = both(m.gpu_host()), v1 = both(v.gpu_host());
  // A range of several chunks, small ones, a gap (elements 70000..70099 in no range).
  std::vector<AdamWRange> ranges = {
      {0, 768, false}, {768, 69232, true}, {70100, 3, false}, {70103, 129897, true}};
  for (int round = 0; round < 2; ++round) {
    if (round == 1) ranges[1].decay = false;  // other ranges: a new table
    for (int t = 1; t <= 2; ++t) {
      auto g = both(random_floats(n, 98 + t, -2.0f, 2.0f));
      gpu().adamw_update_ranges(p.gpu(), g.gpu(), m.gpu(), v.gpu(), ranges, 1e-2f, 0.9f, 0.95f,
                                1e-8f, 0.1f, t, 0.5f);
      for (const AdamWRange& r : ranges) {
        gpu().adamw_update(p1.gpu() + r.offset, g.gpu() + r.offset, m1.gpu() + r.offset,
                           v1.gpu() + r.offset, r.n, 1e-2f, 0.9f, 0.95f, 1e-8f,
                           r.decay ? 0.1f : 0.0f, t, 0.5f);
      }
    }
  }
  EXPECT_TRUE(close(p.gpu_f(), p1.gpu_f(), {1e-6, 1e-7}));
  EXPECT_TRUE(close(m.gpu_f(), m1.gpu_f(), {1e-6, 1e-7}));
  EXPECT_TRUE(close(v.gpu_f(), v1.gpu_f(), {1e-6, 1e-7}));
  const std::vector<float> after = p.gpu_f();
  for (size_t i = 70000; i < 70100; ++i) ASSERT_EQ(after[i], p0[i]) << "gap element " << i;
  EXPECT_THROW(gpu().adamw_update_ranges(p.gpu(), p.gpu(), m.gpu(), v.gpu(), ranges, 1e-2f, 0.9f,
                                         0.95f, 1e-8f, 0.1f, 0, 1.0f),
               std::invalid_argument);
}

// The bf16 copy written in AdamW's pass (mixed precision's compute weights) is bit for bit the
// cast of the updated masters, on the vector path (chunks starting at a multiple of 4) and the
// scalar one (70100, 70103: not), and elements in no range keep what they held; the masters and
// moments do not depend on whether the copy was asked for.
TEST_F(CudaTest, AdamWRangesWriteTheBf16CopyAsCastWould) {
  const size_t n = 200000;
  const std::vector<AdamWRange> ranges = {
      {0, 768, false}, {768, 69232, true}, {70100, 3, false}, {70103, 129897, true}};
  auto p = both(random_floats(n, 90)), m = both(random_floats(n, 91, 0.0f, 0.1f)),
       v = both(random_floats(n, 92, 0.0f, 0.1f)), g = both(random_floats(n, 93, -2.0f, 2.0f));
  auto p1 = both(p.gpu_host()), m1 = both(m.gpu_host()), v1 = both(v.gpu_host());
  const std::vector<bf16> sentinel(n, bf16{0x1234});
  auto fused = both(sentinel), cast_copy = both(sentinel);
  gpu().adamw_update_ranges(p.gpu(), g.gpu(), m.gpu(), v.gpu(), ranges, 1e-2f, 0.9f, 0.95f,
                            1e-8f, 0.1f, 3, 0.5f, fused.gpu());
  gpu().adamw_update_ranges(p1.gpu(), g.gpu(), m1.gpu(), v1.gpu(), ranges, 1e-2f, 0.9f, 0.95f,
                            1e-8f, 0.1f, 3, 0.5f);
  EXPECT_EQ(p.gpu_host(), p1.gpu_host());
  EXPECT_EQ(m.gpu_host(), m1.gpu_host());
  EXPECT_EQ(v.gpu_host(), v1.gpu_host());
  gpu().cast(cast_copy.gpu(), p.gpu(), n);
  const std::vector<bf16> want = cast_copy.gpu_host(), got = fused.gpu_host();
  size_t checked = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool in_range = i < 70000 || i >= 70100;
    const uint16_t expect = in_range ? want[i].bits : sentinel[i].bits;
    ASSERT_EQ(got[i].bits, expect) << "element " << i << (in_range ? "" : " (in no range)");
    checked += in_range;
  }
  EXPECT_EQ(checked, n - 100);
}

// A training step's guard read on the device (kernels/step_scalars.h): a non-finite loss or
// norm, or one past its limit (a spike), writes nothing; a finite one clips as an unguarded call
// given clip_factor would; and the scalars are written by sum_squares_into without a host read.
TEST_F(CudaTest, AdamWGuardSkipsNonFiniteStepsAndClipsOnTheDevice) {
  const size_t n = 50000;
  const std::vector<AdamWRange> ranges = {{0, 768, false}, {768, n - 768, true}};
  const std::vector<float> p0 = random_floats(n, 110), m0 = random_floats(n, 111, 0.0f, 0.1f),
                           v0 = random_floats(n, 112, 0.0f, 0.1f);
  auto g = both(random_floats(n, 113, -2.0f, 2.0f));
  const auto run = [&](const std::vector<double>& scalars, double max_norm, float grad_scale,
                       StepLimits limits = {}) {
    auto p = both(p0), m = both(m0), v = both(v0);
    auto s = both(scalars);
    const AdamWGuard guard{reinterpret_cast<const StepScalars*>(s.gpu()), max_norm, limits};
    gpu().adamw_update_ranges(p.gpu(), g.gpu(), m.gpu(), v.gpu(), ranges, 1e-2f, 0.9f, 0.95f, 1e-8f,
                              0.1f, 2, grad_scale, nullptr, scalars.empty() ? nullptr : &guard);
    std::vector<float> all = p.gpu_host(), mm = m.gpu_host(), vv = v.gpu_host();
    all.insert(all.end(), mm.begin(), mm.end());
    all.insert(all.end(), vv.begin(), vv.end());
    return all;
  };
  std::vector<float> unchanged = p0;
  unchanged.insert(unchanged.end(), m0.begin(), m0.end());
  unchanged.insert(unchanged.end(), v0.begin(), v0.end());
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& bad :
       std::vector<std::vector<double>>{{nan, 4.0}, {inf, 4.0}, {1.0, nan}, {1.0, inf}}) {
    EXPECT_EQ(run(bad, 1.0, 1.0f), unchanged) << bad[0] << " " << bad[1];
  }
  EXPECT_EQ(run({3.0, 16.0}, 1.0, 1.0f), run({}, 0, clip_factor(4.0, 1.0)));
  EXPECT_EQ(run({3.0, 16.0}, 8.0, 0.5f), run({}, 0, 0.5f));
  // A spike (resilience.spike_*_zscore): past a limit nothing is written; at it, the update.
  EXPECT_EQ(run({3.0, 16.0}, 1.0, 1.0f, {2.9, inf}), unchanged);
  EXPECT_EQ(run({3.0, 16.0}, 1.0, 1.0f, {inf, 3.9}), unchanged);
  EXPECT_EQ(run({3.0, 16.0}, 1.0, 1.0f, {3.0, 4.0}), run({3.0, 16.0}, 1.0, 1.0f));
  // sum_squares_into: the sum the host read gives, left on the device.
  auto dst = both(std::vector<double>{0.0});
  gpu().sum_squares_into(dst.gpu(), g.gpu(), n);
  EXPECT_EQ(dst.gpu_host()[0], gpu().sum_squares(g.gpu(), n));
}

// A recorded step graph (compute.h, worker/step_graph.h): the recording runs nothing; each
// replay runs the recorded calls again and its upload reads the pinned source as it is then;
// an upload from pageable memory cannot be recorded, and a failed recording leaves the backend
// usable.
TEST_F(CudaTest, AStepGraphReplaysItsCallsWithTheSourceAsItIsThen) {
  ASSERT_TRUE(gpu().can_capture());
  const size_t n = 5000;
  int* pinned = static_cast<int*>(gpu().allocate_host(n * sizeof(int)));
  DeviceArray<int> tokens(gpu(), n);
  auto acc = both(std::vector<float>(n, 1.0f)), x = both(random_floats(n, 120));
  for (size_t i = 0; i < n; ++i) pinned[i] = 7;
  gpu().begin_capture();
  gpu().upload(tokens.data(), pinned, n * sizeof(int));
  gpu().add_inplace(acc.gpu(), x.gpu(), n);
  gpu().scale(acc.gpu(), n, 0.5f);
  gpu().end_capture(/*keep=*/true);
  EXPECT_EQ(acc.gpu_host(), std::vector<float>(n, 1.0f)) << "the recording ran its calls";
  ASSERT_TRUE(gpu().has_graph());
  std::vector<float> want(n, 1.0f);
  const std::vector<float> xs = x.gpu_host();
  for (int replay = 1; replay <= 2; ++replay) {
    for (size_t i = 0; i < n; ++i) pinned[i] = replay * 100 + static_cast<int>(i % 3);
    gpu().replay();
    for (size_t i = 0; i < n; ++i) want[i] = (want[i] + xs[i]) * 0.5f;
    EXPECT_EQ(acc.gpu_host(), want) << "replay " << replay;
    std::vector<int> got(n);
    gpu().download(got.data(), tokens.data(), n * sizeof(int));
    EXPECT_EQ(got[4], replay * 100 + 1) << "the upload read the source of replay " << replay;
  }
  std::vector<int> pageable(n, 3);
  gpu().begin_capture();
  EXPECT_FALSE(gpu().has_graph()) << "a new recording drops the old graph";
  EXPECT_THROW(gpu().upload(tokens.data(), pageable.data(), n * sizeof(int)), std::logic_error);
  gpu().end_capture(/*keep=*/false);
  EXPECT_FALSE(gpu().has_graph());
  gpu().upload(tokens.data(), pageable.data(), n * sizeof(int));  // usable again
  std::vector<int> got(n);
  gpu().download(got.data(), tokens.data(), n * sizeof(int));
  EXPECT_EQ(got[0], 3);
  gpu().release_host(pinned);
}

// A graph reads and writes the memory it was recorded with: released, that memory takes the
// graph with it (a replay would use freed memory); memory allocated since cannot be in it.
TEST_F(CudaTest, ReleasingMemoryTheGraphMayUseDropsIt) {
  const size_t n = 1000;
  void* used = gpu().allocate(n * sizeof(float));
  void* host = gpu().allocate_host(n * sizeof(float));
  gpu().begin_capture();
  gpu().scale(static_cast<float*>(used), n, 0.5f);
  gpu().end_capture(/*keep=*/true);
  ASSERT_TRUE(gpu().has_graph());
  gpu().release(gpu().allocate(64));
  gpu().release_host(gpu().allocate_host(64));
  EXPECT_TRUE(gpu().has_graph()) << "memory allocated after the recording cannot be in it";
  gpu().release_host(host);
  EXPECT_FALSE(gpu().has_graph()) << "pinned memory from before the recording was released";
  gpu().begin_capture();
  gpu().scale(static_cast<float*>(used), n, 0.5f);
  gpu().end_capture(/*keep=*/true);
  ASSERT_TRUE(gpu().has_graph());
  gpu().release(used);
  EXPECT_FALSE(gpu().has_graph()) << "device memory from before the recording was released";
}

TEST_F(CudaTest, ReductionsAndScaling) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{3000001}}) {
    auto x = both(random_floats(std::max<size_t>(n, 1), 100));
    const double g = gpu().sum_squares(x.gpu(), n), c = cpu().sum_squares(x.cpu(), n);
    EXPECT_NEAR(g, c, 1e-12 * std::max(1.0, c)) << n;
    EXPECT_EQ(g, gpu().sum_squares(x.gpu(), n)) << "deterministic";
    if (n > 1) {  // from the second element: not 16-byte aligned, one float a load
      const double g1 = gpu().sum_squares(x.gpu() + 1, n - 1);
      const double c1 = cpu().sum_squares(x.cpu() + 1, n - 1);
      EXPECT_NEAR(g1, c1, 1e-12 * std::max(1.0, c1)) << n - 1 << " elements, misaligned";
    }
  }
  const size_t n = 12345;
  auto acc = both(random_floats(n, 101)), x = both(random_floats(n, 102));
  gpu().add_inplace(acc.gpu(), x.gpu(), n);
  cpu().add_inplace(acc.cpu(), x.cpu(), n);
  gpu().scale(acc.gpu(), n, -0.3f);
  cpu().scale(acc.cpu(), n, -0.3f);
  EXPECT_TRUE(close(acc.gpu_f(), acc.cpu_f(), {0, 0}));
  // Gradients reduced in bf16 are folded into fp32 ones: widen exactly, add in float.
  const std::vector<float> wide = random_floats(n, 103);
  std::vector<bf16> x16(n);
  for (size_t i = 0; i < n; ++i) x16[i] = to_bf16(wide[i]);
  auto half = both(x16);
  gpu().add_inplace(acc.gpu(), half.gpu(), n);
  cpu().add_inplace(acc.cpu(), half.cpu(), n);
  EXPECT_TRUE(close(acc.gpu_f(), acc.cpu_f(), {0, 0}));
}

TEST_F(CudaTest, CastsAreBitExact) {
  std::vector<float> f = random_floats(70000, 110, -1e4f, 1e4f);
  f[0] = INFINITY, f[1] = -INFINITY, f[2] = NAN, f[3] = 3.4e38f, f[4] = 1e-40f, f[5] = -0.0f;
  auto src = both(f);
  auto half = both(std::vector<bf16>(f.size()));
  auto back = both(std::vector<float>(f.size()));
  gpu().cast(half.gpu(), src.gpu(), f.size());
  cpu().cast(half.cpu(), src.cpu(), f.size());
  gpu().cast(back.gpu(), half.gpu(), f.size());
  cpu().cast(back.cpu(), half.cpu(), f.size());
  const auto hg = half.gpu_host(), hc = half.cpu_host();
  EXPECT_EQ(std::memcmp(hg.data(), hc.data(), hg.size() * sizeof(bf16)), 0);
  const auto bg = back.gpu_host(), bc = back.cpu_host();
  EXPECT_EQ(std::memcmp(bg.data(), bc.data(), bg.size() * sizeof(float)), 0);
}

TEST(CudaDevices, CountComesWithAReason) {
  std::string why;
  const int count = visible_device_count(&why);
  if (count == 0) {
    EXPECT_FALSE(why.empty());
    EXPECT_THROW(make_cuda_compute(0, false), std::runtime_error);
    GTEST_SKIP() << "no GPU: " << why;
  }
  EXPECT_THROW(make_cuda_compute(count, false), std::runtime_error);
}

}  // namespace
}  // namespace rm::cuda

#include "kernels/cuda/attention.h"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/elementwise_math.h"
#include "kernels/row_math.h"

namespace rm::cuda {
namespace {

void check_shapes(const char* fn, int B, int Tn, int C, int H) {
  if (B < 0 || Tn < 0 || C < 0 || H <= 0 || C % H != 0) {
    throw std::invalid_argument(std::string("rm::cuda::") + fn +
                                ": bad shape B=" + std::to_string(B) + " T=" + std::to_string(Tn) +
                                " C=" + std::to_string(C) + " H=" + std::to_string(H) +
                                " (need H > 0 dividing C)");
  }
}

// Row r of [rows, Tn] scores -- one batch entry's H*Tn rows, or all B*H*Tn -- is query
// i = r % Tn: softmax over j <= i, zeros after. scores and att may be the same memory (T = float):
// each element is read and written by the same thread.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    causal_softmax_kernel(T* att, const float* scores, int Tn) {
  const size_t row = static_cast<size_t>(blockIdx.x) * Tn;
  const int i = static_cast<int>(blockIdx.x % Tn);
  const float* p = scores + row;
  T* a = att + row;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, p[j]);
  mx = block_max(mx);
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) sum += fast_expf(p[j] - mx);
  const float inv = 1.0f / block_sum(sum);
  for (int j = threadIdx.x; j < Tn; j += blockDim.x) {
    a[j] = store<T>(j <= i ? fast_expf(p[j] - mx) * inv : 0.0f);
  }
}

// dpre = a * (datt - <a, datt>) over j <= i, zeros after. datt and dpre may be the same memory.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    causal_softmax_backward_kernel(T* dpre, const float* datt, const T* att, int Tn) {
  const size_t row = static_cast<size_t>(blockIdx.x) * Tn;
  const int i = static_cast<int>(blockIdx.x % Tn);
  const T* a = att + row;
  const float* d = datt + row;
  T* out = dpre + row;
  float dot = 0.0f;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) dot += load(a[j]) * d[j];
  dot = block_sum(dot);
  for (int j = threadIdx.x; j < Tn; j += blockDim.x) {
    out[j] = store<T>(j <= i ? softmax_backward_element(load(a[j]), d[j], dot) : 0.0f);
  }
}

// Whether the float scores are formed in att itself (T = float), rather than in a scratch of
// one batch entry's H x Tn x Tn floats (bf16): then all B x H pairs go at once between the
// GEMMs and the softmax (attention_plan may group them by head, min(B, H) calls a GEMM).
template <typename T>
constexpr bool kScoresInAtt = std::is_same_v<T, float>;

// The one-entry float scratch the bf16 path forms its scores (and their gradients) in.
float* score_scratch(float* scratch) {
  if (scratch == nullptr) throw std::invalid_argument("rm::cuda attention: no score scratch");
  return scratch;
}

}  // namespace

template <typename T>
size_t attention_scratch_floats(int Tn, int H) {
  return std::is_same_v<T, float> ? 0 : static_cast<size_t>(H) * Tn * Tn;
}

template <typename T>
void attention_forward(const Blas& blas, T* out, T* att, const T* qkv, int B, int Tn, int C, int H,
                       float* scores, cudaStream_t stream) {
  check_shapes("attention_forward", B, Tn, C, H);
  if (B == 0 || Tn == 0 || C == 0) return;
  const AttentionPlan plan = attention_plan(B, Tn, C, H, kScoresInAtt<T>);
  const RowMajorGemm qk = attention_scores_gemm(plan);
  const RowMajorGemm av = attention_values_gemm(plan);
  if constexpr (kScoresInAtt<T>) {
    // All the scores, one softmax launch over every row in place, then all the values.
    const LaunchShape all_rows = row_launch(static_cast<size_t>(B) * H * Tn, Tn);
    for (int g = 0; g < plan.calls; ++g) {
      const AttentionOffsets o = plan.offsets(g);
      gemm(blas, qk, qkv + o.qkv, qkv + o.qkv + C, att + o.att);  // scale Q K^T
    }
    RM_CUDA_LAUNCH(causal_softmax_kernel<T>, all_rows, stream, att, att, Tn);
    for (int g = 0; g < plan.calls; ++g) {
      const AttentionOffsets o = plan.offsets(g);
      gemm(blas, av, att + o.att, qkv + o.qkv + 2 * C, out + o.out);  // att V
    }
  } else {
    // One batch entry at a time through the float scratch of its H x Tn x Tn scores.
    const LaunchShape rows = row_launch(static_cast<size_t>(H) * Tn, Tn);
    float* const s = score_scratch(scores);
    for (int g = 0; g < plan.calls; ++g) {
      const AttentionOffsets o = plan.offsets(g);
      const T* q = qkv + o.qkv;
      gemm(blas, qk, q, q + C, s);  // scale Q K^T
      RM_CUDA_LAUNCH(causal_softmax_kernel<T>, rows, stream, att + o.att, s, Tn);
      gemm(blas, av, att + o.att, q + 2 * C, out + o.out);  // att V
    }
  }
}

template <typename T>
void attention_backward(const Blas& blas, T* dqkv, T* datt_scratch, const T* dout, const T* qkv,
                        const T* att, int B, int Tn, int C, int H, float* scores,
                        cudaStream_t stream) {
  check_shapes("attention_backward", B, Tn, C, H);
  if (B == 0 || Tn == 0 || C == 0) return;
  const AttentionPlan plan = attention_plan(B, Tn, C, H, kScoresInAtt<T>);
  const RowMajorGemm dv = attention_dvalues_gemm(plan);
  const RowMajorGemm da = attention_datt_gemm(plan);
  const RowMajorGemm dq = attention_dq_gemm(plan);
  const RowMajorGemm dk = attention_dk_gemm(plan);
  // Call g's dV and datt; then (after the softmax backward of its rows) its dQ and dK.
  auto values_and_datt = [&](int g, auto* datt_g) {  // T* (float) or the float scratch
    const AttentionOffsets o = plan.offsets(g);
    gemm(blas, dv, att + o.att, dout + o.out, dqkv + o.qkv + 2 * C);  // dV = att^T dout
    gemm(blas, da, dout + o.out, qkv + o.qkv + 2 * C, datt_g);        // datt = dout V^T
  };
  auto queries_and_keys = [&](int g) {
    const AttentionOffsets o = plan.offsets(g);
    const T* dpre = datt_scratch + o.att;
    gemm(blas, dq, dpre, qkv + o.qkv + C, dqkv + o.qkv);  // dQ = scale dpre K
    gemm(blas, dk, dpre, qkv + o.qkv, dqkv + o.qkv + C);  // dK = scale dpre^T Q
  };
  if constexpr (kScoresInAtt<T>) {
    // All of datt, one softmax-backward launch over every row in place, then all of dQ, dK.
    const LaunchShape all_rows = row_launch(static_cast<size_t>(B) * H * Tn, Tn);
    for (int g = 0; g < plan.calls; ++g) values_and_datt(g, datt_scratch + plan.offsets(g).att);
    RM_CUDA_LAUNCH(causal_softmax_backward_kernel<T>, all_rows, stream, datt_scratch, datt_scratch,
                   att, Tn);
    for (int g = 0; g < plan.calls; ++g) queries_and_keys(g);
  } else {
    // One batch entry at a time through the float scratch of its H x Tn x Tn score gradients.
    const LaunchShape rows = row_launch(static_cast<size_t>(H) * Tn, Tn);
    float* const datt = score_scratch(scores);
    for (int g = 0; g < plan.calls; ++g) {
      const AttentionOffsets o = plan.offsets(g);
      T* dpre = datt_scratch + o.att;
      values_and_datt(g, datt);
      RM_CUDA_LAUNCH(causal_softmax_backward_kernel<T>, rows, stream, dpre, datt, att + o.att, Tn);
      queries_and_keys(g);
    }
  }
}

template size_t attention_scratch_floats<float>(int, int);
template size_t attention_scratch_floats<bf16>(int, int);
template void attention_forward<float>(const Blas&, float*, float*, const float*, int, int, int,
                                       int, float*, cudaStream_t);
template void attention_forward<bf16>(const Blas&, bf16*, bf16*, const bf16*, int, int, int, int,
                                      float*, cudaStream_t);
template void attention_backward<float>(const Blas&, float*, float*, const float*, const float*,
                                        const float*, int, int, int, int, float*, cudaStream_t);
template void attention_backward<bf16>(const Blas&, bf16*, bf16*, const bf16*, const bf16*,
                                       const bf16*, int, int, int, int, float*, cudaStream_t);

}  // namespace rm::cuda

#include "kernels/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel_util.h"
#include "kernels/elementwise_math.h"
#include "kernels/row_math.h"

namespace rm::cpu {
namespace {

// Rows are processed in blocks; block [i0, i1) only needs key columns [0, i1), so the GEMMs skip
// most of the masked upper triangle (at T=256, 62% of the full T x T work instead of 100%) while
// each call stays large enough for the BLAS kernel to run efficiently. The forward and backward
// use the same blocks: the backward relies on the forward having zeroed the masked entries
// inside each diagonal block.
constexpr int kRowBlock = 64;

void check_shapes(const char* fn, int B, int T, int C, int H) {
  if (B < 0 || T < 0 || C < 0 || H <= 0 || C % H != 0) {
    throw std::invalid_argument(std::string("rm::cpu::") + fn +
                                ": bad shape B=" + std::to_string(B) + " T=" + std::to_string(T) +
                                " C=" + std::to_string(C) + " H=" + std::to_string(H) +
                                " (need H > 0 dividing C)");
  }
}

// In place: p[0..i] (scaled scores of row i) -> softmax probabilities; p[i+1 .. end) -> 0.
void causal_softmax_row(float* __restrict p, int i, int end) {
  const float mx = detail::max_of(p, i + 1);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j <= i; ++j) {
    const float e = fast_expf(p[j] - mx);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j <= i; ++j) p[j] *= inv;
  for (int j = i + 1; j < end; ++j) p[j] = 0.0f;
}

// In place: d[0..i] (= dL/datt of row i) -> dL/dscore = a * (d - <a, d>); d[i+1 .. end) -> 0.
void softmax_backward_row(float* __restrict d, const float* __restrict a, int i, int end) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int j = 0; j <= i; ++j) dot += a[j] * d[j];
#pragma omp simd
  for (int j = 0; j <= i; ++j) d[j] = softmax_backward_element(a[j], d[j], dot);
  for (int j = i + 1; j < end; ++j) d[j] = 0.0f;
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H) {
  check_shapes("attention_forward", B, T, C, H);
  const int hs = C / H, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H;
    const float* q = qkv + static_cast<size_t>(b) * T * C3 + h * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* a = att + bh * TT;
    float* o = out + static_cast<size_t>(b) * T * C + h * hs;
    for (int i0 = 0; i0 < T; i0 += kRowBlock) {
      const int i1 = std::min(T, i0 + kRowBlock), rows = i1 - i0;
      float* a_blk = a + static_cast<size_t>(i0) * T;
      // scores[i0:i1, 0:i1] = scale * Q[i0:i1] K[0:i1]^T
      sgemm(false, true, rows, i1, hs, scale, q + static_cast<size_t>(i0) * C3, C3, k, C3, 0.0f,
            a_blk, T);
      for (int i = i0; i < i1; ++i) causal_softmax_row(a + static_cast<size_t>(i) * T, i, i1);
      // out[i0:i1] = att[i0:i1, 0:i1] V[0:i1]
      sgemm(false, false, rows, hs, i1, 1.0f, a_blk, T, v, C3, 0.0f,
            o + static_cast<size_t>(i0) * C, C);
    }
  }
}

void attention_backward(float* dqkv, float* datt_scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int H) {
  check_shapes("attention_backward", B, T, C, H);
  if (B == 0 || T == 0 || C == 0) return;
  const int hs = C / H, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
  const int block = std::min(T, kRowBlock);
  // Never more threads than (b, h) pairs, so each thread's scratch slice lies inside the
  // B*H*T*T floats the caller provides.
  const int nthreads = std::min(omp_get_max_threads(), B * H);
#pragma omp parallel num_threads(nthreads)
  {
    float* dpre = datt_scratch + static_cast<size_t>(omp_get_thread_num()) * block * T;
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const size_t qkv_off = static_cast<size_t>(b) * T * C3 + h * hs;
      const float* q = qkv + qkv_off;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + qkv_off;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* a = att + bh * TT;
      const float* dout_h = dout + static_cast<size_t>(b) * T * C + h * hs;
      // Last block first: it spans all key rows [0, T), so its dK/dV GEMMs overwrite (beta = 0)
      // and the earlier blocks, which cover [0, i1), accumulate onto them.
      for (int i0 = (T - 1) / kRowBlock * kRowBlock; i0 >= 0; i0 -= kRowBlock) {
        const int i1 = std::min(T, i0 + kRowBlock), rows = i1 - i0;
        const float beta = i1 == T ? 0.0f : 1.0f;
        const float* a_blk = a + static_cast<size_t>(i0) * T;
        const float* do_blk = dout_h + static_cast<size_t>(i0) * C;
        // dV[0:i1] (+)= att[i0:i1, 0:i1]^T dout[i0:i1]
        sgemm(true, false, i1, hs, rows, 1.0f, a_blk, T, do_blk, C, beta, dv, C3);
        // datt[i0:i1, 0:i1] = dout[i0:i1] V[0:i1]^T, then through the softmax.
        sgemm(false, true, rows, i1, hs, 1.0f, do_blk, C, v, C3, 0.0f, dpre, T);
        for (int i = i0; i < i1; ++i) {
          softmax_backward_row(dpre + static_cast<size_t>(i - i0) * T,
                               a + static_cast<size_t>(i) * T, i, i1);
        }
        // The 1/sqrt(hs) of the scores goes into alpha.
        // dQ[i0:i1] = scale * dpre K[0:i1]
        sgemm(false, false, rows, hs, i1, scale, dpre, T, k, C3, 0.0f,
              dq + static_cast<size_t>(i0) * C3, C3);
        // dK[0:i1] (+)= scale * dpre^T Q[i0:i1]
        sgemm(true, false, i1, hs, rows, scale, dpre, T, q + static_cast<size_t>(i0) * C3, C3, beta,
              dk, C3);
      }
    }
  }
}

}  // namespace rm::cpu

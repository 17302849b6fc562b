#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/parallel_util.h"
#include "kernels/row_math.h"

namespace rm::cpu {

using detail::row_offset;

// The per-row formulas live in kernels/row_math.h (shared with the CUDA kernels).
static_assert(kLayerNormEps == rm::kLayerNormEps, "one epsilon for both backends");

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  const bool parallel = static_cast<size_t>(N) * C >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int n = 0; n < N; ++n) {
    const float* __restrict x = inp + row_offset(n, C);
    float* __restrict o = out + row_offset(n, C);
    // Two passes over a row that sits in L1, both on centred data: the residual stream can
    // drift to a large mean, where E[x^2] - E[x]^2 cancels and even a plain float sum of x loses
    // digits. Summing x - x[0] keeps the terms at the scale of the deviations.
    const float shift = x[0];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c] - shift;
    const float m = layernorm_mean(shift, sum, C);
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) sq += (x[c] - m) * (x[c] - m);
    const float s = layernorm_rstd(sq, C);
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = layernorm_normalise(x[c], m, s, weight[c], bias[c]);
    if (mean != nullptr) mean[n] = m;
    if (rstd != nullptr) rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
  if (N <= 0 || C <= 0) return;
  const bool parallel = static_cast<size_t>(N) * C >= detail::kMinParallelElems;
  const int nblocks = detail::num_col_blocks(C);
#pragma omp parallel if (parallel)
  {
    // Input gradient, per row (llm.c): with xhat = (x - mean) * rstd and g = weight * dout,
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    // nowait: the parameter-gradient loop below reads only inputs.
#pragma omp for schedule(static) nowait
    for (int n = 0; n < N; ++n) {
      const float* __restrict x = inp + row_offset(n, C);
      const float* __restrict d = dout + row_offset(n, C);
      float* __restrict dx = dinp + row_offset(n, C);
      const float m = mean[n], s = rstd[n];
      float g_sum = 0.0f, gx_sum = 0.0f;
#pragma omp simd reduction(+ : g_sum, gx_sum)
      for (int c = 0; c < C; ++c) {
        const float g = weight[c] * d[c];
        g_sum += g;
        gx_sum += layernorm_gx_term(g, x[c], m, s);
      }
      const float g_mean = g_sum / C, gx_mean = gx_sum / C;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        dx[c] += layernorm_dinp(x[c], d[c], weight[c], m, s, g_mean, gx_mean);
      }
    }
    // Parameter gradients are sums over rows: one column block per thread (see kColBlock).
#pragma omp for schedule(static)
    for (int blk = 0; blk < nblocks; ++blk) {
      const int c0 = blk * detail::kColBlock;
      const int w = std::min(detail::kColBlock, C - c0);
      float acc_w[detail::kColBlock] = {};
      float acc_b[detail::kColBlock] = {};
      for (int n = 0; n < N; ++n) {
        const float* __restrict x = inp + row_offset(n, C) + c0;
        const float* __restrict d = dout + row_offset(n, C) + c0;
        const float m = mean[n], s = rstd[n];
#pragma omp simd
        for (int j = 0; j < w; ++j) {
          acc_w[j] += layernorm_dweight_term(x[j], d[j], m, s);
          acc_b[j] += d[j];
        }
      }
      for (int j = 0; j < w; ++j) {
        dweight[c0 + j] += acc_w[j];
        dbias[c0 + j] += acc_b[j];
      }
    }
  }
}

}  // namespace rm::cpu

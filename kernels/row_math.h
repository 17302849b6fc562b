// Per-row math shared by the CPU and CUDA kernels: the formulas of layernorm, the attention
// softmax's backward and softmax cross-entropy, once a row's statistics are known.
//
// How a row's sums are formed differs by backend (the CPU sums with `omp simd` lanes, the GPU
// with a block reduction), so only what follows the sums lives here; each function is the exact
// expression the CPU loop evaluated before it was factored out, so CPU results are bit-identical
// and the CPU tests (finite differences) check the formulas the GPU compiles. Pure, branch-free,
// RM_HOST_DEVICE, so the CPU loops calling them still vectorise.
#pragma once

#include <math.h>

#include "kernels/host_device.h"

namespace rm {

// ---- LayerNorm (kernels/cpu/layernorm.h) ------------------------------------------------------
inline constexpr float kLayerNormEps = 1e-5f;  // PyTorch's default

// The mean of a row from the sum of its entries minus `shift` (the row's first entry: summing
// centred values keeps the terms at the scale of the deviations).
RM_HOST_DEVICE inline float layernorm_mean(float shift, float centred_sum, int C) {
  return shift + centred_sum / C;
}

// 1 / sqrt(biased variance + eps), from the sum of squared deviations from the mean.
RM_HOST_DEVICE inline float layernorm_rstd(float squared_deviation_sum, int C) {
  return 1.0f / sqrtf(squared_deviation_sum / C + kLayerNormEps);
}

// One output element: (x - mean) * rstd * weight + bias.
RM_HOST_DEVICE inline float layernorm_normalise(float x, float mean, float rstd, float weight,
                                                float bias) {
  return (x - mean) * rstd * weight + bias;
}

// Backward. With xhat = (x - mean) * rstd and g = weight * dout, the row needs
//   g_mean = mean_c g,  gx_mean = mean_c g * xhat   (summed as layernorm_gx_term)
// and then each input's gradient is rstd * (g - g_mean - xhat * gx_mean) (llm.c's form).
RM_HOST_DEVICE inline float layernorm_gx_term(float g, float x, float mean, float rstd) {
  return g * (x - mean) * rstd;
}
RM_HOST_DEVICE inline float layernorm_dinp(float x, float dout, float weight, float mean,
                                           float rstd, float g_mean, float gx_mean) {
  const float xhat = (x - mean) * rstd;
  return rstd * (weight * dout - g_mean - xhat * gx_mean);
}
// The weight gradient's term of one element (summed over rows); the bias's is dout itself.
RM_HOST_DEVICE inline float layernorm_dweight_term(float x, float dout, float mean, float rstd) {
  return (x - mean) * rstd * dout;
}

// ---- Softmax (the attention's causal softmax, kernels/cpu/attention.h) -------------------------
// dL/dscore_j = a_j * (dL/da_j - <a, dL/da>), given the row's dot product <a, dL/da>.
RM_HOST_DEVICE inline float softmax_backward_element(float a, float datt, float dot) {
  return a * (datt - dot);
}

// ---- Softmax cross-entropy (kernels/cpu/cross_entropy.h) ---------------------------------------
// With mx the row's max and exp_sum = sum_j exp(x_j - mx) (double):
//   loss = log(exp_sum) + mx - x[target]
//   dlogit_j = exp(x_j - mx) * factor - (j == target) * grad_scale, factor = grad_scale / exp_sum
// where the target's subtraction is a second float operation (as PyTorch's softmax - onehot).
RM_HOST_DEVICE inline double cross_entropy_row_loss(double exp_sum, float mx, float x_target) {
  return log(exp_sum) + mx - x_target;
}
RM_HOST_DEVICE inline float cross_entropy_grad_factor(float grad_scale, double exp_sum) {
  return static_cast<float>(grad_scale / exp_sum);
}

}  // namespace rm

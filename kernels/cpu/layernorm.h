// LayerNorm over the last dimension, eps = 1e-5 (PyTorch default).
//
// Threading: OpenMP over rows (and over channel blocks for the weight/bias gradients).
// No aliasing between outputs and inputs.
#pragma once

namespace rm::cpu {

inline constexpr float kLayerNormEps = 1e-5f;

// out[n,:] = (inp[n,:] - mean_n) * rstd_n * weight + bias, for inp[N,C].
// mean[N] and rstd[N] = 1/sqrt(var + eps) (biased variance) are saved for the backward; either
// may be null when no backward follows.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);

// Gradients given dout[N,C] and the mean/rstd saved by the forward:
//   dinp[N,C]  += ...   ACCUMULATED, unlike other input gradients: the input of every layernorm
//                       in the model is the residual stream, whose gradient already holds the
//                       residual path's contribution, so the kernel adds into it.
//   dweight[C] += ...   ACCUMULATED
//   dbias[C]   += ...   ACCUMULATED
// dinp must not alias dout or inp.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C);

}  // namespace rm::cpu

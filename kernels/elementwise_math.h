// Element-wise math shared by the CPU and CUDA kernels.
//
// Everything here is a pure function of its arguments, marked RM_HOST_DEVICE, so the CUDA kernels
// compile the very same formulas the CPU tests check. Functions are branch-free (selects only) so
// that CPU loops calling them auto-vectorise at -O3 without -ffast-math.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace rm {

// exp(x) in float. On the host, a Cephes-style range reduction and degree-6 polynomial (max
// error ~2 ulp, ~20 vector instructions per 8 values): glibc's expf is only vectorised under
// -ffast-math, and softmax, cross-entropy and GELU are exp-bound.
// Tails: returns 0 below about -87.7 (where expf is denormal) and +inf above 88.376 (expf's own
// overflow is at 88.72), -inf -> 0, +inf -> +inf; NaN propagates.
// On the device, 2^(x log2 e) on the special-function unit with subnormal results flushed
// (ex2.approx.ftz.f32: a multiply and one MUFU.EX2, where CUDA's expf wraps the same unit in a
// range reduction of ~6 more instructions): relative error ~2 ulp + |x| 2^-24 (the rounding of
// x log2 e; CUDA's __expf), under 1e-6 for |x| < 16 and 6e-6 at the tails -- the kernels'
// tests against the host allow 1e-4 in float. 0 below about -87.3, the same tails otherwise.
RM_HOST_DEVICE inline float fast_expf(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
#else
  // Clamp so that n = round(x / ln2) lies in [-127, 128]. Both compares are false for NaN, which
  // therefore flows through to the result.
  float xc = x > 88.7228391f ? 88.7228391f : x;
  xc = xc < -88.0f ? -88.0f : xc;
  // x = n ln2 + r with |r| <= ln2/2. Adding 1.5 * 2^23 rounds x/ln2 to the nearest integer n and
  // leaves n in the low mantissa bits of t (no float->int conversion, which is UB for NaN).
  const float kRound = 12582912.0f;
  const float t = xc * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  float r = xc - n * 0.693359375f;  // ln2 in two parts, so n * ln2 is exact enough
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n from the exponent bits: n = -127 gives the bits of +0 (underflow to 0), n = 128 those
  // of +inf (overflow), everything between a normal power of two.
  // Unsigned arithmetic: for NaN input the bits are arbitrary, and a signed shift would be UB.
  uint32_t bits;
  std::memcpy(&bits, &t, sizeof(bits));
  bits = (bits - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
#endif
}

// GELU, tanh approximation (PyTorch approximate="tanh"):
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
// Evaluated as x * sigmoid(2u) = x / (1 + exp(-2u)), which is the same function with one exp and
// no cancellation in either tail (1 + tanh(u) loses all digits for u << 0).
constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

RM_HOST_DEVICE inline float gelu_tanh(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return x / (1.0f + fast_expf(-2.0f * u));
}

// d gelu / dx = s + 2 x s (1 - s) u',  s = sigmoid(2u), 1 - s = e s with e = exp(-2u).
// x is clamped to [-10, 10] first: beyond it the derivative is 1 or 0 to float precision
// (|error| < 1e-35), and the clamp keeps e finite (e = inf would give inf * 0 = NaN) and x^2
// from overflowing. NaN passes through the clamp.
RM_HOST_DEVICE inline float gelu_tanh_grad(float x) {
  float xc = x > 10.0f ? 10.0f : x;
  xc = xc < -10.0f ? -10.0f : xc;
  const float u = kGeluSqrt2OverPi * (xc + kGeluCubic * xc * xc * xc);
  const float e = fast_expf(-2.0f * u);  // <= exp(87.4): finite
  const float s = 1.0f / (1.0f + e);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xc * xc);
  return s + 2.0f * xc * s * (e * s) * du;
}

// AdamW (PyTorch torch.optim.AdamW, decoupled weight decay), per element:
//   g *= grad_scale; p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// which is p -= lr * mhat / (sqrt(vhat) + eps), written the way PyTorch evaluates it.
// The step-dependent factors are computed once per call by adamw_coeffs (host, double).
struct AdamWCoeffs {
  float beta1, beta2, eps;
  float decay;       // 1 - lr * weight_decay
  float step_size;   // lr / (1 - beta1^t)
  float rsqrt_bc2;   // 1 / sqrt(1 - beta2^t)
  float grad_scale;  // folded-in clipping / averaging factor
};

inline AdamWCoeffs adamw_coeffs(float lr, float beta1, float beta2, float eps, float weight_decay,
                                int64_t t, float grad_scale) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  AdamWCoeffs c;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.eps = eps;
  c.decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  c.step_size = static_cast<float>(lr / bc1);
  c.rsqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  c.grad_scale = grad_scale;
  return c;
}

// Updates m and v in place and returns the new parameter value.
RM_HOST_DEVICE inline float adamw_element(float p, float g, float& m, float& v,
                                          const AdamWCoeffs& c) {
  g *= c.grad_scale;
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * g * g;
  return p * c.decay - c.step_size * m / (sqrtf(v) * c.rsqrt_bc2 + c.eps);
}

}  // namespace rm

#include "kernels/cuda/adamw.h"

#include <cstdint>
#include <stdexcept>

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/elementwise_math.h"
#include "kernels/step_scalars.h"

namespace rm::cuda {
namespace {

__global__ void __launch_bounds__(kElementwiseThreads)
    adamw_kernel(float* params, const float* grads, float* m, float* v, size_t n, AdamWCoeffs c) {
  RM_GRID_STRIDE_LOOP(i, n) {
    float mi = m[i], vi = v[i];
    params[i] = adamw_element(params[i], grads[i], mi, vi, c);
    m[i] = mi;
    v[i] = vi;
  }
}

// One element: the update, and its bf16 rounding where `rounded` is given (as cast writes it).
__device__ inline void adamw_scalar(float* params, const float* grads, float* m, float* v,
                                    bf16* rounded, size_t i, const AdamWCoeffs& c) {
  float mi = m[i], vi = v[i];
  const float p = adamw_element(params[i], grads[i], mi, vi, c);
  params[i] = p;
  m[i] = mi;
  v[i] = vi;
  if (rounded != nullptr) rounded[i] = to_bf16(p);
}

// Four elements a thread, 16-byte loads and stores (8-byte ones for the bf16 copy): at scalar
// 4-byte accesses the kernel reached ~76% of an H200's bandwidth. Element i's arithmetic is the
// scalar path's; which path an element takes depends only on the chunk table (fixed per layout),
// so reruns give the same bits.
__device__ inline void adamw_vector(float* params, const float* grads, float* m, float* v,
                                    bf16* rounded, size_t i, const AdamWCoeffs& c) {
  float4 p = *reinterpret_cast<const float4*>(params + i);
  const float4 g = *reinterpret_cast<const float4*>(grads + i);
  float4 mm = *reinterpret_cast<const float4*>(m + i);
  float4 vv = *reinterpret_cast<const float4*>(v + i);
  p.x = adamw_element(p.x, g.x, mm.x, vv.x, c);
  p.y = adamw_element(p.y, g.y, mm.y, vv.y, c);
  p.z = adamw_element(p.z, g.z, mm.z, vv.z, c);
  p.w = adamw_element(p.w, g.w, mm.w, vv.w, c);
  *reinterpret_cast<float4*>(params + i) = p;
  *reinterpret_cast<float4*>(m + i) = mm;
  *reinterpret_cast<float4*>(v + i) = vv;
  if (rounded != nullptr) {
    const uint32_t lo = to_bf16(p.x).bits | (static_cast<uint32_t>(to_bf16(p.y).bits) << 16);
    const uint32_t hi = to_bf16(p.z).bits | (static_cast<uint32_t>(to_bf16(p.w).bits) << 16);
    *reinterpret_cast<uint2*>(rounded + i) = make_uint2(lo, hi);
  }
}

// One block a chunk. `aligned`: every pointer 16-byte aligned (rounded 8), so a chunk starting
// at a multiple of 4 elements takes the vector path for its whole groups of 4.
__global__ void __launch_bounds__(kElementwiseThreads)
    adamw_chunks_kernel(float* params, const float* grads, float* m, float* v, bf16* rounded,
                        const AdamWChunk* chunks, AdamWCoeffs with_decay, AdamWCoeffs without,
                        bool aligned, const StepScalars* scalars, double max_norm,
                        StepLimits limits) {
  const AdamWChunk ch = chunks[blockIdx.x];
  AdamWCoeffs c = ch.decay != 0 ? with_decay : without;
  if (scalars != nullptr) {
    // Every thread reads the same 16 bytes (L2 serves them) and takes the host's decision.
    const StepScalars s = *scalars;
    if (!step_is_applied(s, limits)) return;
    c.grad_scale *= clip_factor(step_grad_norm(s), max_norm);
  }
  unsigned done = 0;
  if (aligned && ch.offset % 4 == 0) {
    const unsigned groups = ch.n / 4;
    for (unsigned k = threadIdx.x; k < groups; k += blockDim.x) {
      adamw_vector(params, grads, m, v, rounded, ch.offset + 4 * static_cast<size_t>(k), c);
    }
    done = groups * 4;
  }
  for (unsigned k = done + threadIdx.x; k < ch.n; k += blockDim.x) {
    adamw_scalar(params, grads, m, v, rounded, ch.offset + k, c);
  }
}

}  // namespace

void adamw_update_chunks(float* params, const float* grads, float* m, float* v, bf16* rounded,
                         const AdamWChunk* chunks, size_t count, float lr, float beta1, float beta2,
                         float eps, float weight_decay, int64_t t, float grad_scale,
                         const AdamWGuard& guard, cudaStream_t stream) {
  if (t < 1) throw std::invalid_argument("rm::cuda::adamw_update: step t must be >= 1");
  if (count == 0) return;
  const AdamWCoeffs with_decay = adamw_coeffs(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  const AdamWCoeffs without = adamw_coeffs(lr, beta1, beta2, eps, 0.0f, t, grad_scale);
  const auto at = [](const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  const bool aligned =
      at(params, 16) && at(grads, 16) && at(m, 16) && at(v, 16) && at(rounded, 8);
  RM_CUDA_LAUNCH(adamw_chunks_kernel,
                 (LaunchShape{static_cast<unsigned>(count), kElementwiseThreads}), stream, params,
                 grads, m, v, rounded, chunks, with_decay, without, aligned, guard.scalars,
                 guard.max_norm, guard.limits);
}

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale, cudaStream_t stream) {
  if (t < 1) throw std::invalid_argument("rm::cuda::adamw_update: step t must be >= 1");
  const AdamWCoeffs c = adamw_coeffs(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  RM_CUDA_LAUNCH(adamw_kernel, elementwise_launch(n), stream, params, grads, m, v, n, c);
}

}  // namespace rm::cuda

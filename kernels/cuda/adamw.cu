#include "kernels/cuda/adamw.h"

#include <stdexcept>

#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/elementwise_math.h"

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

__global__ void __launch_bounds__(kElementwiseThreads)
    adamw_chunks_kernel(float* params, const float* grads, float* m, float* v,
                        const AdamWChunk* chunks, AdamWCoeffs with_decay, AdamWCoeffs without) {
  const AdamWChunk ch = chunks[blockIdx.x];
  const AdamWCoeffs c = ch.decay != 0 ? with_decay : without;
  for (unsigned k = threadIdx.x; k < ch.n; k += blockDim.x) {
    const size_t i = ch.offset + k;
    float mi = m[i], vi = v[i];
    params[i] = adamw_element(params[i], grads[i], mi, vi, c);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void adamw_update_chunks(float* params, const float* grads, float* m, float* v,
                         const AdamWChunk* chunks, size_t count, float lr, float beta1,
                         float beta2, float eps, float weight_decay, int64_t t, float grad_scale,
                         cudaStream_t stream) {
  if (t < 1) throw std::invalid_argument("rm::cuda::adamw_update: step t must be >= 1");
  if (count == 0) return;
  const AdamWCoeffs with_decay = adamw_coeffs(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  const AdamWCoeffs without = adamw_coeffs(lr, beta1, beta2, eps, 0.0f, t, grad_scale);
  RM_CUDA_LAUNCH(adamw_chunks_kernel, (LaunchShape{static_cast<unsigned>(count), kElementwiseThreads}),
                 stream, params, grads, m, v, chunks, with_decay, without);
}

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale, cudaStream_t stream) {
  if (t < 1) throw std::invalid_argument("rm::cuda::adamw_update: step t must be >= 1");
  const AdamWCoeffs c = adamw_coeffs(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  RM_CUDA_LAUNCH(adamw_kernel, elementwise_launch(n), stream, params, grads, m, v, n, c);
}

}  // namespace rm::cuda

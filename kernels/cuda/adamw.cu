#include "kernels/cuda/adamw.h"

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_util.h"
#include "kernels/elementwise_math.h"

namespace rm::cuda {
namespace {

// The coefficients (bias corrections for step t) are computed once on the host and passed by
// value, as on the CPU.
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, size_t n,
                             AdamWCoeffs c) {
  RM_GRID_STRIDE_LOOP(i, n) {
    float mi = m[i], vi = v[i];
    params[i] = adamw_element(params[i], grads[i], mi, vi, c);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale, cudaStream_t stream) {
  if (t < 1) throw std::invalid_argument("rm::cuda::adamw_update: step t must be >= 1");
  if (n == 0) return;
  const AdamWCoeffs c = adamw_coeffs(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  adamw_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(params, grads, m, v, n, c);
  RM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace rm::cuda

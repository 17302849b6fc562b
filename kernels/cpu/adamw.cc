#include "kernels/cpu/adamw.h"

#include <stdexcept>

#include "kernels/cpu/parallel_util.h"
#include "kernels/elementwise_math.h"

namespace rm::cpu {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale) {
  if (t < 1) throw std::invalid_argument("rm::cpu::adamw_update: step t must be >= 1");
  const AdamWCoeffs c = adamw_coeffs(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) params[i] = adamw_element(params[i], grads[i], m[i], v[i], c);
}

}  // namespace rm::cpu

// AdamW with decoupled weight decay (torch.optim.AdamW); per-element math in elementwise_math.h.
//
//   g = grads * grad_scale          (clipping / averaging folded in)
//   p -= lr * weight_decay * p
//   m = beta1 m + (1 - beta1) g ;  v = beta2 v + (1 - beta2) g^2
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//
// t is the 1-based step count. params, m, v are updated in place; grads is read only.
// Threading: OpenMP over elements. Buffers must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rm::cpu {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale);

}  // namespace rm::cpu

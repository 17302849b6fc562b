#include "worker/adamw_optimizer.h"

#include <cmath>

#include "kernels/cpu/kernels.h"

namespace rm {

AdamWOptimizer::AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout)
    : config_(config), layout_(layout), m_(layout.size(), 0.0f), v_(layout.size(), 0.0f) {}

double AdamWOptimizer::grad_norm(const float* grads, size_t n) {
  return std::sqrt(cpu::sum_squares(grads, n));
}

void AdamWOptimizer::step(float* params, const float* grads, double lr, double norm) {
  ++t_;
  float scale = 1.0f;
  if (config_.grad_clip > 0 && norm > config_.grad_clip) {
    scale = static_cast<float>(config_.grad_clip / (norm + 1e-6));
  }
  for (const TensorSpec& t : layout_.tensors()) {
    const size_t o = t.offset;
    cpu::adamw_update(params + o, grads + o, m_.data() + o, v_.data() + o, t.numel,
                      static_cast<float>(lr), static_cast<float>(config_.beta1),
                      static_cast<float>(config_.beta2), static_cast<float>(config_.eps),
                      t.decay ? static_cast<float>(config_.weight_decay) : 0.0f, t_, scale);
  }
}

}  // namespace rm

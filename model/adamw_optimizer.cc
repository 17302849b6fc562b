#include "model/adamw_optimizer.h"

#include <algorithm>
#include <stdexcept>

namespace rm {

AdamWOptimizer::AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout,
                               Compute& compute, size_t begin, size_t end)
    : config_(config), layout_(layout), compute_(compute), begin_(begin), end_(end),
      m_(compute, end - begin), v_(compute, end - begin) {
  // One range per tensor that overlaps the shard (weight decay differs between tensors); the
  // layout and the shard are fixed, so the ranges are too.
  for (const TensorSpec& t : layout_.tensors()) {
    const size_t lo = std::max(t.offset, begin_), hi = std::min(t.offset + t.numel, end_);
    if (lo < hi) ranges_.push_back({lo - begin_, hi - lo, t.decay});
  }
}

void AdamWOptimizer::queue_step(float* params, const float* grads, double lr,
                                const StepScalars* scalars, bf16* rounded,
                                const StepLimits& limits) {
  if (queued_) throw std::logic_error("AdamWOptimizer::queue_step: the last step was not finished");
  const AdamWGuard guard{scalars, config_.grad_clip, limits};
  limits_ = limits;
  compute_.adamw_update_ranges(params, grads, m_.data(), v_.data(), ranges_, static_cast<float>(lr),
                               static_cast<float>(config_.beta1), static_cast<float>(config_.beta2),
                               static_cast<float>(config_.eps),
                               static_cast<float>(config_.weight_decay), t_ + 1, 1.0f, rounded,
                               &guard);
  queued_ = true;
}

bool AdamWOptimizer::finish_step(const StepScalars& scalars) {
  if (!queued_) throw std::logic_error("AdamWOptimizer::finish_step: no step was queued");
  queued_ = false;
  const bool ran = step_is_applied(scalars, limits_);
  if (ran) ++t_;
  return ran;
}

}  // namespace rm

#include "model/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "configs/lr_decay_start.h"

namespace rm {

double learning_rate(const OptimizerConfig& opt, int64_t step, int64_t total_steps) {
  if (step < opt.warmup_steps) {
    return opt.lr * static_cast<double>(step + 1) / static_cast<double>(opt.warmup_steps);
  }
  if (opt.schedule == LrScheduleKind::kConstant) return opt.lr;
  const int64_t start = decay_start(opt, total_steps);
  if (step < start) return opt.lr;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - 1 - start);
  const double progress = std::clamp(static_cast<double>(step - start) / decay_steps, 0.0, 1.0);
  const double factor =
      opt.schedule == LrScheduleKind::kCosine ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return opt.min_lr + (opt.lr - opt.min_lr) * factor;
}

}  // namespace rm

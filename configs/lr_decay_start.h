// Where a job's learning-rate decay begins, from its optimizer section and train.steps alone:
// model/lr_schedule.h's schedule uses it, and a resumed run with another train.steps names it
// (base/run_dir.cc) without the model layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "configs/job_config.h"

namespace rm {

// The 0-based step at which the decay starts (its rate still opt.lr, the next one lower): the
// end of the warmup, or under wsd the first of the last decay_fraction of the steps (at least
// two: the decay's first step is still at lr, its last at min_lr) if later. Steps 1 ..
// decay_start + 1, counted from 1 as runs print them, are at opt.lr once warmed up. Unused by
// kConstant.
inline int64_t decay_start(const OptimizerConfig& opt, int64_t total_steps) {
  if (opt.schedule != LrScheduleKind::kWsd) return opt.warmup_steps;
  const auto decaying = std::max<int64_t>(
      2, static_cast<int64_t>(std::llround(opt.decay_fraction * static_cast<double>(total_steps))));
  return std::max<int64_t>(opt.warmup_steps, total_steps - decaying);
}

}  // namespace rm

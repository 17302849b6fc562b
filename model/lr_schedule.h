// The learning rate at an optimizer step: linear warmup from lr/warmup to lr over
// warmup_steps, then cosine or linear decay to min_lr at the last step, or constant.
// A pure function of the step, so a resumed run continues the schedule exactly.
#pragma once

#include <cstdint>

#include "configs/job_config.h"

namespace rm {

// step is 0-based; total_steps = train.steps.
double learning_rate(const OptimizerConfig& opt, int64_t step, int64_t total_steps);

}  // namespace rm

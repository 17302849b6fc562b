// The learning rate at an optimizer step: linear warmup from lr/warmup to lr over
// warmup_steps, then cosine or linear decay to min_lr at the last step, or constant, or (wsd)
// constant until the last decay_fraction of the steps and linear to min_lr at the last step.
// A pure function of the step, so a resumed run continues the schedule exactly; under wsd also
// of nothing but the step before the decay begins, so a run extended then (train.steps made
// larger on resume) goes on exactly as the longer run would have.
#pragma once

#include <cstdint>

#include "configs/job_config.h"

namespace rm {

// step is 0-based; total_steps = train.steps.
double learning_rate(const OptimizerConfig& opt, int64_t step, int64_t total_steps);

}  // namespace rm

// AdamW over one contiguous range [begin, end) of the flat parameter layout: the whole buffer
// when replicated, this rank's shard under ZeRO. Decoupled weight decay applies to the tensors
// the layout marks `decay`; global-norm gradient clipping is folded into the update.
//
// The moments cover only the range (this is where ZeRO-1 saves memory); this class owns them,
// in the memory of the Compute it runs on, as float (with mixed precision too: the parameters it
// updates are the fp32 master weights). step() is not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "configs/job_config.h"
#include "kernels/compute.h"
#include "model/param_layout.h"

namespace rm {

class AdamWOptimizer {
 public:
  AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout, Compute& compute,
                 size_t begin, size_t end);
  AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout, Compute& compute)
      : AdamWOptimizer(config, layout, compute, 0, layout.size()) {}

  // Queues one update with learning rate lr, guarded by a step's scalars in the Compute's memory
  // (kernels/step_scalars.h: the global loss and gradient sum of squares, over all ranks in
  // sharded modes): the device skips it when either is not finite and clips the gradient to
  // optimizer.grad_clip (when > 0) by the norm, with no host wait. params and grads (memory of
  // the Compute) address element `begin` of the range. `rounded` (may be null): the bf16
  // compute copy of params, same indexing, refreshed for the range in the same pass
  // (Compute::adamw_update_ranges). The update is numbered steps_taken() + 1 (Adam's bias
  // correction); finish_step says whether it ran, before the next queue_step.
  // `limits`: the update is also skipped where the scalars pass them (a spike).
  void queue_step(float* params, const float* grads, double lr, const StepScalars* scalars,
                  bf16* rounded = nullptr, const StepLimits& limits = {});
  // The host's copy of the scalars the queued update was guarded by: counts the step where
  // step_is_applied(scalars, the queued limits), the device's own test. Returns whether it ran.
  bool finish_step(const StepScalars& scalars);

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }  // on resume: bias correction continues exactly
  // The moments of the range, in the Compute's memory.
  float* m() const { return m_.data(); }
  float* v() const { return v_.data(); }

 private:
  OptimizerConfig config_;
  const ParamLayout& layout_;
  Compute& compute_;
  size_t begin_, end_;
  DeviceArray<float> m_, v_;
  std::vector<AdamWRange> ranges_;  // the shard's tensors, all updated in one call
  int64_t t_ = 0;
  bool queued_ = false;  // a queue_step awaits its finish_step
  StepLimits limits_;    // the queued step's
};

}  // namespace rm

// What decides a training step's update, kept in backend memory (device memory on cuda) so that
// the step queues its optimizer without waiting for the device: the loss and the gradient's sum
// of squares are written there by the step's kernels (and summed over the ranks where each
// holds a part), and the AdamW kernel reads them to skip or clip the update. The host reads
// them once, at the step's end, and takes the same decision from the same bits with the same
// functions below (worker/sharded_state.h: queue_optimizer_step, finish_optimizer_step).
#pragma once

#include <math.h>

#include <cmath>

#include "kernels/host_device.h"

namespace rm {

struct StepScalars {
  double loss_sum = 0;  // the step's loss sum; NaN when a target was out of range
  double grad_sq = 0;   // the sum of squares of the whole gradient, over every rank's shard
};

// The global gradient norm sqrt(grad_sq): correctly rounded on both sides, so host and device
// agree to the bit.
RM_HOST_DEVICE inline double step_grad_norm(const StepScalars& s) {
#ifdef __CUDA_ARCH__
  return sqrt(s.grad_sq);
#else
  return std::sqrt(s.grad_sq);
#endif
}

// The update runs only when the loss and the gradient norm are finite: resilience.on_nan then
// decides on the host what a skipped step means (skip, roll back or fail), knowing the weights
// and moments were left as they were.
RM_HOST_DEVICE inline bool step_is_finite(const StepScalars& s) {
#ifdef __CUDA_ARCH__
  return isfinite(s.loss_sum) && isfinite(step_grad_norm(s));
#else
  return std::isfinite(s.loss_sum) && std::isfinite(step_grad_norm(s));
#endif
}

// Where a step's update stops being ordinary (resilience.spike_loss_zscore, spike_norm_zscore;
// worker/outlier_window.h): a loss sum or a gradient norm above these is a spike, and the update
// is skipped as a non-finite one is. Infinity: no limit (the default).
struct StepLimits {
  double loss_sum = INFINITY;
  double grad_norm = INFINITY;
};

// Whether a step's update runs: finite, and within its limits. The one test of the device and
// of the host.
RM_HOST_DEVICE inline bool step_is_applied(const StepScalars& s, const StepLimits& limits) {
  return step_is_finite(s) && !(s.loss_sum > limits.loss_sum) &&
         !(step_grad_norm(s) > limits.grad_norm);
}

// The factor that clips the gradient to global norm max_norm (optimizer.grad_clip; <= 0: none),
// in double as the host computed it before the decision moved to the device, so that runs keep
// their bits.
RM_HOST_DEVICE inline float clip_factor(double norm, double max_norm) {
  return max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.0f;
}

// How an AdamW update is guarded by a step's scalars (Compute::adamw_update_ranges).
struct AdamWGuard {
  const StepScalars* scalars = nullptr;  // backend memory
  double max_norm = 0;                   // optimizer.grad_clip
  StepLimits limits;                     // the update runs only where step_is_applied
};

}  // namespace rm

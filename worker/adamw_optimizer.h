// AdamW over the flat parameter buffer: decoupled weight decay on the tensors the layout marks
// `decay`, global-norm gradient clipping folded into the update, and a NaN/Inf guard.
//
// The moments are flat buffers with the parameters' layout; this class owns them.
// step() is not thread-safe; the kernels it calls use OpenMP inside.
#pragma once

#include <cstdint>
#include <vector>

#include "configs/job_config.h"
#include "worker/param_layout.h"

namespace rm {

class AdamWOptimizer {
 public:
  AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout);

  // Global L2 norm of the gradient buffer (double accumulation).
  static double grad_norm(const float* grads, size_t n);

  // One update with learning rate lr, given the gradient norm already computed (on all
  // ranks, for sharded modes). Clips to optimizer.grad_clip when that is > 0.
  void step(float* params, const float* grads, double lr, double grad_norm);

  int64_t steps_taken() const { return t_; }
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }

 private:
  OptimizerConfig config_;
  const ParamLayout& layout_;
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

}  // namespace rm

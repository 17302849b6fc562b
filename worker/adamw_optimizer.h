// AdamW over one contiguous range [begin, end) of the flat parameter layout: the whole buffer
// when replicated, this rank's shard under ZeRO. Decoupled weight decay applies to the tensors
// the layout marks `decay`; global-norm gradient clipping is folded into the update.
//
// The moments cover only the range (this is where ZeRO-1 saves memory); this class owns them.
// step() is not thread-safe; the kernels it calls use OpenMP inside.
#pragma once

#include <cstdint>
#include <vector>

#include "configs/job_config.h"
#include "worker/param_layout.h"

namespace rm {

class AdamWOptimizer {
 public:
  AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout, size_t begin,
                 size_t end);
  AdamWOptimizer(const OptimizerConfig& config, const ParamLayout& layout)
      : AdamWOptimizer(config, layout, 0, layout.size()) {}

  // Global L2 norm of the gradient buffer (double accumulation).
  static double grad_norm(const float* grads, size_t n);

  // One update with learning rate lr, given the global gradient norm (computed over all ranks
  // in sharded modes). params and grads address element `begin` of the range. Clips to
  // optimizer.grad_clip when that is > 0.
  void step(float* params, const float* grads, double lr, double grad_norm);

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }  // on resume: bias correction continues exactly
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }

 private:
  OptimizerConfig config_;
  const ParamLayout& layout_;
  size_t begin_, end_;
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

}  // namespace rm

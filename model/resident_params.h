// A model's whole parameters held in its compute's memory for inference (`ringmaster eval` on the
// job's backend): the fp32 values uploaded once and, for a bf16 model, their bf16 copy cast on
// that backend -- the values a bf16 training step's forward reads (worker/sharded_state.h keeps
// the same copy). Read-only: a forward and its loss, never a backward.
#pragma once

#include <vector>

#include "kernels/bf16.h"
#include "kernels/compute.h"
#include "model/model.h"
#include "model/param_access.h"

namespace rm {

class ResidentParams final : public ParamAccess {
 public:
  // host_params: the model's full parameters (layout().size() floats, else
  // std::invalid_argument). Allocates on model.compute(); the upload and cast are queued there.
  ResidentParams(const Model& model, const std::vector<float>& host_params);

  // Unit u's parameters in the model's precision (float or bf16), memory of its compute.
  const void* acquire_params(int u) override;
  void release_params(int) override {}
  // A forward-only holder: std::logic_error.
  float* acquire_grads(int u) override;
  void release_grads(int) override {}

 private:
  const std::vector<ParamUnit>& units_;
  DeviceArray<float> fp32_;
  DeviceArray<bf16> bf16_;  // empty for an fp32 model
};

}  // namespace rm

// A model's whole parameters held in its compute's memory for inference (`ringmaster eval` on the
// job's backend): for an fp32 model the fp32 values (uploaded once; on the cpu backend, whose
// memory is the host's, read where they are), for a bf16 model only their bf16 copy, cast on
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
  // std::invalid_argument); they must outlive this object (the cpu backend's fp32 reads them in
  // place). Allocates on model.compute() and waits for the upload and the cast there.
  ResidentParams(const Model& model, const std::vector<float>& host_params);

  // Unit u's parameters in the model's precision (float or bf16), memory of its compute.
  const void* acquire_params(int u) override;
  void release_params(int) override {}
  // A forward-only holder: std::logic_error.
  float* acquire_grads(int u) override;
  void release_grads(int) override {}

 private:
  const std::vector<ParamUnit>& units_;
  const float* fp32_ = nullptr;  // an fp32 model's: host_params on the cpu, else uploaded_
  DeviceArray<float> uploaded_;
  DeviceArray<bf16> bf16_;  // a bf16 model's
};

}  // namespace rm

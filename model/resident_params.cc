#include "model/resident_params.h"

#include <stdexcept>
#include <string>

namespace rm {

ResidentParams::ResidentParams(const Model& model, const std::vector<float>& host_params)
    : units_(model.units()) {
  const size_t n = model.layout().size();
  if (host_params.size() != n) {
    throw std::invalid_argument("ResidentParams: " + std::to_string(host_params.size()) +
                                " parameters for a model of " + std::to_string(n));
  }
  Compute& compute = model.compute();
  const bool bf16_model = model.precision() == Precision::kBf16;
  if (compute.kind() == ComputeKind::kCpu && !bf16_model) {
    fp32_ = host_params.data();  // the cpu backend's memory is the host's: no second copy
    return;
  }
  uploaded_ = DeviceArray<float>(compute, n);
  compute.upload(uploaded_.data(), host_params.data(), n * sizeof(float));
  fp32_ = uploaded_.data();
  if (bf16_model) {
    // Cast where it runs, as training refreshes its copy: the same rounding on every backend.
    // Then the fp32 values go: a bf16 forward never reads them.
    bf16_ = DeviceArray<bf16>(compute, n);
    compute.cast(bf16_.data(), uploaded_.data(), n);
    compute.synchronize();
    uploaded_.reset();
    fp32_ = nullptr;
  } else {
    compute.synchronize();
  }
}

const void* ResidentParams::acquire_params(int u) {
  const size_t begin = units_.at(static_cast<size_t>(u)).begin;
  if (bf16_.data() != nullptr) return bf16_.data() + begin;
  return fp32_ + begin;
}

float* ResidentParams::acquire_grads(int u) {
  throw std::logic_error("ResidentParams: unit " + std::to_string(u) +
                         " asked for gradients: these parameters are for inference only");
}

}  // namespace rm

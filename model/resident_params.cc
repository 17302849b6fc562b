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
  fp32_ = DeviceArray<float>(compute, n);
  compute.upload(fp32_.data(), host_params.data(), n * sizeof(float));
  if (model.precision() == Precision::kBf16) {
    // Cast where it runs, as training refreshes its copy: the same rounding on every backend.
    bf16_ = DeviceArray<bf16>(compute, n);
    compute.cast(bf16_.data(), fp32_.data(), n);
  }
}

const void* ResidentParams::acquire_params(int u) {
  const size_t begin = units_.at(static_cast<size_t>(u)).begin;
  if (bf16_.data() != nullptr) return bf16_.data() + begin;
  return fp32_.data() + begin;
}

float* ResidentParams::acquire_grads(int u) {
  throw std::logic_error("ResidentParams: unit " + std::to_string(u) +
                         " asked for gradients: these parameters are for inference only");
}

}  // namespace rm

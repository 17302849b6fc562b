#include "worker/device_select.h"

#include <cstdlib>

#include "kernels/compute_factory.h"

namespace rm {
namespace {

std::string visible_devices_note() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v != nullptr ? std::string(" (CUDA_VISIBLE_DEVICES=") + v + ")" : std::string();
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

DeviceChoice choose_device(Backend backend, int local_rank, int local_ranks, int gpus,
                           const std::string& why_none) {
  DeviceChoice c;
  if (backend == Backend::kCpu) {
    c.reason = "parallel.backend: cpu";
    return c;
  }
  const bool automatic = backend == Backend::kAuto;
  if (gpus == 0) {
    if (!automatic) {
      throw DeviceError("parallel.backend is cuda, but no GPU is usable here: " + why_none +
                        visible_devices_note() + "; use parallel.backend: cpu (or auto)");
    }
    c.reason = "auto: no GPU visible (" + why_none + ")";
    return c;
  }
  if (local_ranks > gpus) {
    throw DeviceError(std::string("parallel.backend is ") + choice_name(backend) + ": " +
                      plural(local_ranks, "rank") +
                      " on this node but only " + plural(gpus, "GPU") + " visible" +
                      visible_devices_note() +
                      "; each rank needs its own GPU: start at most " + plural(gpus, "rank") +
                      " per node" +
                      (automatic ? ", or set parallel.backend: cpu" : ""));
  }
  c.kind = ComputeKind::kCuda;
  c.device = local_rank;
  c.reason = automatic ? "auto: " + plural(gpus, "GPU") + " visible" : "parallel.backend: cuda";
  return c;
}

DeviceChoice choose_device(Backend backend, int local_rank, int local_ranks) {
  if (backend == Backend::kCpu) return choose_device(backend, local_rank, local_ranks, 0, "");
  std::string why;
  const int gpus = cuda_device_count(&why);
  return choose_device(backend, local_rank, local_ranks, gpus, why);
}

}  // namespace rm

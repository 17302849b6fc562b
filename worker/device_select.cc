#include "worker/device_select.h"

#include <algorithm>
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
                           const std::string& why_none, bool own_gpus_possible) {
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
  if (local_ranks > gpus && own_gpus_possible) {
    // Fewer GPUs in view than ranks on the node: either each rank sees its own (bound per
    // task), or they share too few. Only the GPUs' identities tell, and the ranks compare them
    // before anything is written (gpus_shared).
    c.kind = ComputeKind::kCuda;
    c.device = local_rank % gpus;
    c.reason = std::string(automatic ? "auto" : "parallel.backend: cuda") + ": " +
               plural(gpus, "GPU") + " visible to this rank of " + std::to_string(local_ranks) +
               " on the node: its own if bound per task; taking visible GPU " +
               std::to_string(c.device);
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

DeviceChoice choose_device(Backend backend, int local_rank, int local_ranks,
                           bool own_gpus_possible) {
  if (backend == Backend::kCpu) return choose_device(backend, local_rank, local_ranks, 0, "");
  std::string why;
  const int gpus = cuda_device_count(&why);
  return choose_device(backend, local_rank, local_ranks, gpus, why, own_gpus_possible);
}

std::string gpus_shared(const std::vector<std::string>& uuid_of_rank,
                        const std::vector<int>& host_of_rank) {
  const size_t n = std::min(uuid_of_rank.size(), host_of_rank.size());
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (uuid_of_rank[i].empty() || uuid_of_rank[i] != uuid_of_rank[j] ||
          host_of_rank[i] != host_of_rank[j]) {
        continue;
      }
      return "ranks " + std::to_string(i) + " and " + std::to_string(j) +
             " are on the same node and would use the same GPU (UUID " + uuid_of_rank[i] +
             "); each rank needs its own GPU: start fewer ranks per node, or give each task its "
             "own GPU (Slurm: --gpus-per-task=1)";
    }
  }
  return "";
}

}  // namespace rm

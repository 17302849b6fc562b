// Which compute backend and device a rank uses (parallel.backend), decided before anything is
// written to the run directory, so that a job asking for hardware the node lacks leaves nothing
// behind.
//
//   cpu   the cpu backend.
//   cuda  GPU `local rank` of the GPUs this process sees (CUDA_VISIBLE_DEVICES applies). No
//         usable GPU is a DeviceError; so are more ranks on the node than GPUs, unless each rank
//         may see GPUs of its own (a scheduler binding GPUs per task, as Slurm's
//         --gpus-per-task does: every rank then sees one GPU, its own, as device 0): the rank
//         takes its visible GPU `local rank` mod their number, and the ranks check by UUID
//         that no two of a node took the same one (gpus_shared).
//   auto  cuda when this node has a GPU for every local rank (or each rank may see its own, as
//         above), the cpu when it has none; some GPUs but fewer than the local ranks is a
//         DeviceError (silently training on the CPU of a GPU node would be the worse surprise).
// Every rank of a job must end on the same kind: choose_device is a function of node-wide facts
// (the same on every rank of a node); agree_on_kind in the caller settles nodes that differ.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "configs/job_choices.h"
#include "kernels/compute.h"

namespace rm {

// Bad input in the sense of the exit codes (kExitBadInput): the job asks for hardware that is
// not there. Retrying on the same node cannot help.
class DeviceError : public InputError {
 public:
  explicit DeviceError(const std::string& what) : InputError(what) {}
};

struct DeviceChoice {
  ComputeKind kind = ComputeKind::kCpu;
  int device = -1;     // cuda: the device index; cpu: -1
  std::string reason;  // why this backend, for the start-up line ("auto: no GPU visible: ...")
};

// gpus: the GPUs this process sees; why_none: why there are none (when gpus == 0).
// own_gpus_possible: the node's ranks may each see GPUs of their own (a rank started by MPI or
// srun); false where they surely share this process's view (the launcher, for the ranks it
// starts with its own environment).
DeviceChoice choose_device(Backend backend, int local_rank, int local_ranks, int gpus,
                           const std::string& why_none, bool own_gpus_possible = false);
// The same, with the GPUs probed (kernels/compute_factory.h: cuda_device_count).
DeviceChoice choose_device(Backend backend, int local_rank, int local_ranks,
                           bool own_gpus_possible = false);

// uuid_of_rank[r]: the UUID of the GPU rank r took (cuda_device_uuid); host_of_rank[r]: its
// host. "" when no two ranks of a host took the same GPU, else the message of the DeviceError
// that refuses the job, naming the first two ranks that did and the GPU.
std::string gpus_shared(const std::vector<std::string>& uuid_of_rank,
                        const std::vector<int>& host_of_rank);

}  // namespace rm

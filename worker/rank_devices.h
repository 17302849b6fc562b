// The compute backend and the communicators of one rank, made in the order their dependencies
// need: the Compute first (on cuda it selects the rank's GPU), then the host communicator (MPI
// across ranks, or self for a lone process), then on cuda the NCCL communicator, whose
// operations run after the work queued on the compute stream.
//
// Which carries what:
//   comm()      gradients, reduce-scatter and all-gather of shards: memory of the Compute
//               (host with the cpu backend: the MPI communicator; device with cuda: NCCL).
//   host_comm   host scalars (loss and stop flag, gradient norm, evaluation sums) and the
//               checkpoint agreement: always MPI (or self).
// Members are destroyed in reverse order: NCCL before the stream it waits on.
#pragma once

#include <memory>

#include "collectives/communicator.h"
#include "kernels/compute.h"
#include "worker/device_select.h"
#include "worker/mpi_bootstrap.h"

namespace rm {

struct RankDevices {
  std::unique_ptr<Compute> compute;
  std::unique_ptr<Communicator> host_comm;
  std::unique_ptr<Communicator> device_comm;  // cuda only
  Communicator& comm() const { return device_comm ? *device_comm : *host_comm; }
};

// mpi == nullptr: a lone process (self communicators). threads: the cpu backend's thread count
// (configure_threads). Throws what the backends throw when a device or NCCL cannot start.
RankDevices make_rank_devices(const DeviceChoice& choice, int threads, double timeout_s,
                              const MpiSession* mpi);

}  // namespace rm

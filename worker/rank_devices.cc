#include "worker/rank_devices.h"

#include <mpi.h>

#include <stdexcept>

#include "collectives/self_communicator.h"
#include "kernels/compute_factory.h"
#ifdef RM_HAVE_NCCL
#include "collectives/nccl/nccl_communicator.h"
#endif

namespace rm {

RankDevices make_rank_devices(const DeviceChoice& choice, int threads, double timeout_s,
                              const MpiSession* mpi) {
  RankDevices d;
  ComputeOptions options;
  options.threads = threads;
  options.device = choice.device;
  d.compute = make_compute(choice.kind, options);
  d.host_comm = mpi != nullptr ? mpi->communicator(timeout_s) : make_self_communicator();
  if (choice.kind == ComputeKind::kCpu) return d;

  if (mpi == nullptr) {
    // One rank: nothing moves, but communicated buffers must be device memory.
    Compute* compute = d.compute.get();
    d.device_comm = make_self_communicator(
        {[compute](size_t bytes) { return compute->allocate(bytes); },
         [compute](void* p) { compute->release(p); }});
    return d;
  }
#ifdef RM_HAVE_NCCL
  CommOptions comm_options;
  comm_options.timeout_s = timeout_s;
  NcclOptions nccl;
  nccl.device = choice.device;
  nccl.compute_stream = d.compute->stream();
  d.device_comm = make_nccl_communicator(MPI_COMM_WORLD, comm_options, nccl);
  return d;
#else
  throw std::runtime_error(
      "the cuda backend needs NCCL for more than one rank, and this build has none (CMake did "
      "not find nccl.h and libnccl)");
#endif
}

}  // namespace rm

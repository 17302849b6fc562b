#include "worker/rank_devices.h"

#include <mpi.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/self_communicator.h"
#include "kernels/compute_factory.h"
#include "worker/fault_injection.h"
#include "worker/startup_agreement.h"
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
  // Every rank's backend is made, and agreed on, before the first communicator: making one is a
  // collective with no deadline (MPI_Comm_dup, ncclCommInitRank), where the others would wait
  // for a rank whose GPU did not start (out of memory, a device lost or taken) until its own
  // MPI_Finalize gave up; instead every rank leaves at once, naming the rank and its error.
  std::exception_ptr failure;
  std::string failed;
  try {
    maybe_fail_compute_start(mpi != nullptr ? mpi->rank() : 0);
    d.compute = make_compute(choice.kind, options);
  } catch (const std::exception& e) {
    failure = std::current_exception();
    failed = e.what();
    if (failed.empty()) failed = "an error without a message";
  }
  if (mpi != nullptr && mpi->world() > 1) {
    const std::vector<std::string> errors = gather_text(failed, "the ranks' compute backends");
    if (failure) std::rethrow_exception(failure);
    for (size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r].empty()) {
        throw std::runtime_error("rank " + std::to_string(r) + " could not start its " +
                                 compute_kind_name(choice.kind) + " backend: " + errors[r]);
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
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

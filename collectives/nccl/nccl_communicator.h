// The nccl backend: collectives on device buffers with NCCL, for one GPU per rank.
//
// Bootstrap: rank 0's ncclUniqueId is broadcast over the given MPI communicator. The NCCL
// communicator is created non-blocking (ncclConfig_t::blocking = 0), so that creation and every
// operation can be polled against the timeout and aborted with ncclCommAbort instead of hanging
// inside NCCL. Operations run in issue order on the communicator's own CUDA stream, each after
// the work already queued on the compute stream (NcclOptions) when it is issued; a Work completes
// when the CUDA event recorded after its kernel has fired (cudaEventQuery). The compute stream
// does not wait for the operation: wait() before touching the buffer again.
//
// Requirements on the caller: MPI is initialised; buffers are device memory on this rank's
// device (the one make_nccl_communicator selected); the same thread makes every call.
#pragma once

#include <mpi.h>

#include <memory>

#include "collectives/communicator.h"

namespace rm {

struct NcclOptions {
  // CUDA device of this rank; -1: the rank's index among the ranks on its node.
  int device = -1;
  // The cudaStream_t that produces the buffers (kernels queued on it before an operation is
  // issued are seen by it); null: the legacy default stream.
  void* compute_stream = nullptr;
};

// Collective over `comm` (duplicated). Shares rank 0's NCCL id first, before any CUDA call:
// where rank 0 cannot make one, its reason reaches every rank, which fails with it as with any
// collective's failure (printed, then MPI_Abort; thrown with abort_on_error off). Then selects
// the device (cudaSetDevice) and creates the NCCL communicator, each wait within
// options.timeout_s. Throws CollectiveError if there is no usable device.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, CommOptions options = {},
                                                     NcclOptions nccl_options = {});

}  // namespace rm

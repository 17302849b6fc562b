// The all-reduce benchmark (bench_allreduce.h's table and checks) for the nccl backend, on
// device buffers: Ringmaster's nccl communicator on a buffer from its allocate(), beside a raw
// ncclAllReduce loop on the same buffer (the baseline of the "busbw vs NCCL" column). Each call
// is complete when it returns: Work::wait() on one side, cudaStreamSynchronize on the other.
#pragma once

#include <mpi.h>

#include "bench/bench_allreduce.h"

namespace rm {

// Collective over `comm`, one GPU per rank (NcclOptions' default device choice). Returns 0 when
// every checked result was exact, 1 otherwise, and 2 -- having printed one line on rank 0 and
// created nothing -- when a rank sees no GPU. options.mpi, plain_buffer and compare_mpi do not
// apply (compare_mpi = false drops the raw NCCL baseline).
int run_nccl_allreduce_bench(MPI_Comm comm, const BenchOptions& options);

}  // namespace rm

// `ringmaster bench allreduce`: the mpi backend's all-reduce against plain MPI_Allreduce, in the
// style of nccl-tests (every size also checked for correctness).
//
// For each size from min_bytes to max_bytes (doubling), rank 0 prints one row with the
// implementations side by side -- Ringmaster on a buffer from Communicator::allocate() (the
// one-pass path), Ringmaster on an ordinary buffer (staged), plain MPI_Allreduce:
//   size count type redop | time(us) algbw(GB/s) busbw(GB/s) #wrong | ... | busbw vs MPI
// time is the median over `rounds` of the mean time per call (the slowest rank's); algbw =
// size / time; busbw = algbw * 2(n-1)/n; #wrong counts elements (summed over ranks) that differ
// from the exact expected sum after one checked call, inputs being (rank+1) * (i % 7). The two
// implementations alternate round by round, so a noisy machine hurts both alike.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdio>

#include "collectives/communicator.h"
#include "collectives/mpi/mpi_communicator.h"

namespace rm {

struct BenchOptions {
  size_t min_bytes = size_t{4} << 10;
  size_t max_bytes = size_t{256} << 20;
  DType dtype = DType::kFloat32;
  // Timed seconds per size and implementation, split over the rounds (at least one call each).
  double seconds_per_size = 0.4;
  int rounds = 5;
  int warmup = 3;            // untimed calls per size and implementation
  bool plain_buffer = true;  // also time Ringmaster on an ordinary (not allocate()d) buffer
  bool compare_mpi = true;   // also time plain MPI_Allreduce(MPI_IN_PLACE)
  CommOptions comm;          // for Ringmaster's communicator
  MpiOptions mpi;
  std::FILE* out = stdout;  // rank 0 prints here
};

// Collective over `comm`. Returns 0 when every checked result was exact, 1 otherwise.
int run_allreduce_bench(MPI_Comm comm, const BenchOptions& options);

}  // namespace rm

// `ringmaster bench allreduce`: the mpi backend's all-reduce (or reduce-scatter, or all-gather)
// against plain MPI on the same buffers, in the style of nccl-tests (every size also checked for
// correctness).
//
// For each size from min_bytes to max_bytes (doubling), rank 0 prints one row with the
// implementations side by side -- Ringmaster on a buffer from Communicator::allocate() (the
// one-pass path), Ringmaster on an ordinary buffer (staged), plain MPI (MPI_Allreduce,
// MPI_Reduce_scatter then moving this rank's shard to its place, MPI_Allgatherv; all in place):
//   size count type redop | time(us) algbw(GB/s) busbw(GB/s) #wrong | ... | busbw vs MPI
// size is the whole buffer (shards: shard_counts of it); time is the median over `rounds` of the
// mean time per call (the slowest rank's); algbw = size / time; busbw = algbw * 2(n-1)/n for
// all-reduce and (n-1)/n for reduce-scatter and all-gather (nccl-tests' convention); #wrong
// counts elements (summed over ranks) that differ from the exact expected result after one
// checked call, rank r's inputs being (r+1) * (i % 7) (all-gather: in rank r's shard). The
// implementations alternate round by round, so a noisy machine hurts all alike.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdio>

#include "collectives/communicator.h"
#include "collectives/mpi/mpi_communicator.h"

namespace rm {

enum class BenchCollective { kAllReduce, kReduceScatter, kAllGather };
const char* bench_collective_name(BenchCollective c);  // "all-reduce", ...

struct BenchOptions {
  BenchCollective collective = BenchCollective::kAllReduce;
  size_t min_bytes = size_t{4} << 10;
  size_t max_bytes = size_t{256} << 20;
  DType dtype = DType::kFloat32;
  // Timed seconds per size and implementation, split over the rounds (at least one call each).
  double seconds_per_size = 0.4;
  int rounds = 5;
  int warmup = 3;            // untimed calls per size and implementation
  bool plain_buffer = true;  // also time Ringmaster on an ordinary (not allocate()d) buffer
  bool compare_mpi = true;   // also time plain MPI on the same buffer
  CommOptions comm;          // for Ringmaster's communicator
  MpiOptions mpi;
  std::FILE* out = stdout;  // rank 0 prints here
};

// Collective over `comm`. Returns 0 when every checked result was exact, 1 otherwise.
int run_allreduce_bench(MPI_Comm comm, const BenchOptions& options);

}  // namespace rm

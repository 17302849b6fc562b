// The measuring and printing loop shared by the all-reduce benchmarks (bench_allreduce.cc for
// the mpi backend, bench_nccl.cc for the nccl backend): nccl-tests' columns for several
// implementations side by side, each size also checked for correctness (the format is described
// in bench_allreduce.h). Internal to bench/.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_allreduce.h"

namespace rm::detail {

struct BenchImpl {
  const char* name;
  char* buf;  // capacity >= options.max_bytes
  // One all-reduce (sum) of buf[0, count), complete when it returns (on every memory kind).
  std::function<void(char* buf, size_t count)> run;
};

// How the table writes inputs into a buffer and reads results back. Empty: the buffers are host
// memory, touched directly. Otherwise (device memory) through these copies, outside the timing.
struct BenchAccess {
  std::function<void(char* buf, const char* host, size_t bytes)> upload;
  std::function<void(char* host, const char* buf, size_t bytes)> download;
};

// Collective over `comm`. `what` is printed under the first header line (one '#' line per
// '\n'-separated line). baseline: the name of the last implementation for the "busbw vs X"
// column, or nullptr for none. Returns 0 when every checked result was exact, 1 otherwise.
int run_bench_table(MPI_Comm comm, const BenchOptions& options, std::vector<BenchImpl> impls,
                    const std::string& what, const char* baseline, const BenchAccess& access);

}  // namespace rm::detail

// collectives_bench: run_allreduce_bench without the ringmaster command, for measuring.
//   mpirun -np 2 collectives_bench [--min-bytes B] [--max-bytes B] [--double | --bf16]
//          [--seconds S] [--rounds R] [--algorithm auto|shm|mpi] [--slot-bytes B] [--no-plain]
//          [--no-mpi] [--backend mpi|nccl]
// --backend nccl (builds with NCCL only): the nccl backend on device buffers beside a raw
// ncclAllReduce loop (--no-mpi drops that baseline); one GPU per rank.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "base/lsan_mpi_program.h"  // LeakSanitizer and Open MPI (ASan builds only)
#include "bench/bench_allreduce.h"
#ifdef RM_HAVE_NCCL
#include "bench/bench_nccl.h"
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  rm::BenchOptions options;
  std::string backend = "mpi";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--min-bytes") {
      options.min_bytes = std::strtoull(value, nullptr, 0), ++i;
    } else if (arg == "--max-bytes") {
      options.max_bytes = std::strtoull(value, nullptr, 0), ++i;
    } else if (arg == "--seconds") {
      options.seconds_per_size = std::atof(value), ++i;
    } else if (arg == "--rounds") {
      options.rounds = std::max(1, std::atoi(value)), ++i;
    } else if (arg == "--slot-bytes") {
      options.mpi.shm_slot_bytes = std::strtoull(value, nullptr, 0), ++i;
    } else if (arg == "--algorithm") {
      const std::string a = value;
      options.mpi.algorithm = a == "shm"   ? rm::MpiOptions::Algorithm::kSharedMemory
                              : a == "mpi" ? rm::MpiOptions::Algorithm::kMpi
                                           : rm::MpiOptions::Algorithm::kAuto;
      ++i;
    } else if (arg == "--double") {
      options.dtype = rm::DType::kFloat64;
    } else if (arg == "--bf16") {
      options.dtype = rm::DType::kBFloat16;
    } else if (arg == "--backend") {
      backend = value, ++i;
    } else if (arg == "--no-mpi") {
      options.compare_mpi = false;
    } else if (arg == "--no-plain") {
      options.plain_buffer = false;
    } else {
      std::fprintf(stderr, "collectives_bench: unknown argument %s\n", arg.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rc = 0;
  if (backend == "mpi") {
    rc = rm::run_allreduce_bench(MPI_COMM_WORLD, options);
  } else if (backend == "nccl") {
#ifdef RM_HAVE_NCCL
    try {
      rc = rm::run_nccl_allreduce_bench(MPI_COMM_WORLD, options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "collectives_bench: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
#else
    std::fprintf(stderr, "collectives_bench: --backend nccl: this build has no NCCL\n");
    rc = 2;
#endif
  } else {
    std::fprintf(stderr, "collectives_bench: --backend %s: want mpi or nccl\n", backend.c_str());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}

// collectives_overlap_probe: does a non-blocking all-reduce progress while the caller computes?
//   mpirun -np 2 collectives_overlap_probe [MiB=64] [compute_ms=200] [reps=5]
// Starts a 64 MiB all-reduce, computes for ~200 ms (fixed work, in L1, no MPI calls, or with a
// poll every ~1 ms), then waits. Prints medians of the compute time, the final wait and the
// total, for MPI_Iallreduce and for Ringmaster's communicator (on a buffer from allocate()),
// beside a blocking all-reduce.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "base/lsan_mpi_program.h"  // LeakSanitizer and Open MPI (ASan builds only)
#include "collectives/mpi/mpi_communicator.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

volatile float g_sink;

// About `units` milliseconds of arithmetic on data in L1 (calibrated below).
long g_iters_per_ms = 1;
void compute(long units, const std::function<void()>& poll) {
  float acc[64] = {};
  for (long u = 0; u < units; ++u) {
    for (long i = 0; i < g_iters_per_ms; ++i) {
      for (int j = 0; j < 64; ++j) acc[j] = acc[j] * 0.999f + 1.0f;
    }
    if (poll) poll();
  }
  g_sink = acc[0];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const long compute_ms = argc > 2 ? std::atol(argv[2]) : 200;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  // Calibrate: iterations per millisecond of compute (the same on every rank).
  g_iters_per_ms = 1000;
  double t0 = now_s();
  compute(100, nullptr);
  double per_ms = 1000 * 100 / ((now_s() - t0) * 1e3);
  MPI_Allreduce(MPI_IN_PLACE, &per_ms, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  g_iters_per_ms = static_cast<long>(per_ms);

  const size_t count = (mib << 20) / sizeof(float);
  std::vector<float> buf(count, 1.0f);
  auto comm = rm::make_mpi_communicator(MPI_COMM_WORLD);
  // Ringmaster as the trainer uses it: on a buffer from allocate().
  auto* registered = static_cast<float*>(comm->allocate(count * sizeof(float)));

  struct Case {
    const char* name;
    std::function<void()> run;
  };
  double compute_time = 0, wait_time = 0;
  MPI_Request request;
  std::unique_ptr<rm::Work> work;
  auto mpi_poll = [&] {
    int flag = 0;
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
  };
  auto timed = [&](const std::function<void()>& start, const std::function<void()>& poll,
                   const std::function<void()>& finish) {
    start();
    double t = now_s();
    compute(compute_ms, poll);
    compute_time = now_s() - t;
    t = now_s();
    finish();
    wait_time = now_s() - t;
  };
  auto mpi_start = [&] {
    MPI_Iallreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                   MPI_COMM_WORLD, &request);
  };
  auto mpi_finish = [&] { MPI_Wait(&request, MPI_STATUS_IGNORE); };
  auto rm_start = [&] {
    work = comm->all_reduce(registered, count, rm::DType::kFloat32, rm::ReduceOp::kAvg);
  };
  auto rm_finish = [&] { work->wait(); };
  std::vector<Case> cases = {
      {"MPI_Allreduce, blocking (no compute)",
       [&] {
         compute_time = 0;
         double t = now_s();
         MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD);
         wait_time = now_s() - t;
       }},
      {"MPI_Iallreduce, no polling", [&] { timed(mpi_start, nullptr, mpi_finish); }},
      {"MPI_Iallreduce, MPI_Test every ~1 ms", [&] { timed(mpi_start, mpi_poll, mpi_finish); }},
      {"ringmaster all_reduce, no polling", [&] { timed(rm_start, nullptr, rm_finish); }},
      {"ringmaster all_reduce, progress() every ~1 ms",
       [&] {
         timed(
             rm_start, [&] { comm->progress(); }, rm_finish);
       }},
  };
  if (rank == 0) {
    std::printf("# %zu MiB all-reduce, %ld ms of compute, median of %d (rank 0)\n", mib, compute_ms,
                reps);
    std::printf("# %-46s %12s %12s %12s\n", "case", "compute(ms)", "wait(ms)", "total(ms)");
  }
  for (const Case& c : cases) {
    std::vector<double> computes, waits, totals;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      c.run();
      computes.push_back(compute_time * 1e3);
      waits.push_back(wait_time * 1e3);
      totals.push_back((compute_time + wait_time) * 1e3);
    }
    if (rank == 0) {
      std::printf("  %-46s %12.1f %12.1f %12.1f\n", c.name, median(computes), median(waits),
                  median(totals));
      std::fflush(stdout);
    }
  }
  comm.reset();
  MPI_Finalize();
  return 0;
}

// collectives_fault_worker: a job in which one rank misbehaves, started under mpirun by
// fault_test. Every rank runs six 1 MiB all-reduces with a 2 s timeout; before the fourth
// (seq=4) the victim rank applies the fault chosen by the test hooks in the environment:
//   RM_TEST_FAULT=stall    sleep RM_TEST_STALL_SECONDS (default 60) before issuing it
//   RM_TEST_FAULT=sigstop  issue it, make some progress, then raise(SIGSTOP)
//   RM_TEST_FAULT=sigkill  issue it, make some progress, then raise(SIGKILL)
//   RM_TEST_FAULT=op       issue it with another op (sum where the others average)
//   RM_TEST_FAULT=short    issue it over 64 elements fewer
//   RM_TEST_FAULT=empty    issue an all-reduce of no elements first (its peers do not)
//   RM_TEST_FAULT=barrier  call barrier() instead
//   RM_TEST_FAULT=stall_allocate  sleep RM_TEST_STALL_SECONDS before allocate() (registered)
//   RM_TEST_STALL_RANK     the victim (default 1); RM_TEST_ALGORITHM=auto|mpi|leaders (leaders:
//   auto with the hierarchical path's host-leaders layout); RM_TEST_BUFFER=plain|registered
//   (from Communicator::allocate); RM_TEST_OPERATION=all_reduce (default)|reduce_scatter (even
//   shards: the operations are then reduce-scatters); RM_TEST_WATCH_RANK: when set, only this
//   rank has the 2 s timeout, the others 60 s, so that this rank's message is the one a test
//   reads (across hosts several ranks wait for a stalled one)
// With a registered buffer, allocate() is the job's first operation (seq=1): the fourth
// all-reduce is then seq=5.
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/lsan_mpi_program.h"  // LeakSanitizer and Open MPI (ASan builds only)
#include "collectives/mpi/mpi_communicator.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string fault = env_or("RM_TEST_FAULT", "none");
  const int victim = std::atoi(env_or("RM_TEST_STALL_RANK", "1").c_str());
  const int stall_seconds = std::atoi(env_or("RM_TEST_STALL_SECONDS", "60").c_str());
  rm::CommOptions options;
  options.timeout_s = 2;
  const std::string watch = env_or("RM_TEST_WATCH_RANK", "");
  if (!watch.empty()) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != std::atoi(watch.c_str())) options.timeout_s = 60;
  }
  rm::MpiOptions mpi;
  const std::string algorithm = env_or("RM_TEST_ALGORITHM", "auto");
  if (algorithm == "mpi") mpi.algorithm = rm::MpiOptions::Algorithm::kMpi;
  if (algorithm == "leaders") mpi.hier_layout = rm::detail::HierLayout::kLeaders;
  const bool scatter = env_or("RM_TEST_OPERATION", "all_reduce") == "reduce_scatter";
  auto comm = rm::make_mpi_communicator(MPI_COMM_WORLD, options, mpi);

  const size_t count = size_t{1} << 18;
  std::vector<float> plain(count, 1.0f);
  float* buf = plain.data();
  if (env_or("RM_TEST_BUFFER", "plain") == "registered") {
    if (comm->rank() == victim && fault == "stall_allocate") {
      std::fprintf(stderr, "[rank %d] test hook: sleeping %d s before allocate()\n", victim,
                   stall_seconds);
      sleep(static_cast<unsigned>(stall_seconds));
    }
    buf = static_cast<float*>(comm->allocate(count * sizeof(float)));
  }
  for (int op = 1; op <= 6; ++op) {
    const bool hit = comm->rank() == victim && op == 4;
    if (hit && fault == "stall") {
      std::fprintf(stderr, "[rank %d] test hook: sleeping %d s before seq=%d\n", victim,
                   stall_seconds, op);
      sleep(static_cast<unsigned>(stall_seconds));
    }
    if (hit && fault == "empty") {
      comm->all_reduce(buf, 0, rm::DType::kFloat32, rm::ReduceOp::kAvg)->wait();
    }
    if (hit && fault == "barrier") {
      comm->barrier();
      continue;
    }
    const size_t elements = hit && fault == "short" ? count - 64 : count;
    const auto reduce_op = hit && fault == "op" ? rm::ReduceOp::kSum : rm::ReduceOp::kAvg;
    auto work = scatter ? comm->reduce_scatter(buf, rm::shard_counts(elements, comm->size()),
                                               rm::DType::kFloat32, reduce_op)
                        : comm->all_reduce(buf, elements, rm::DType::kFloat32, reduce_op);
    if (hit && (fault == "sigstop" || fault == "sigkill")) {
      std::fprintf(stderr, "[rank %d] test hook: %s during seq=%d\n", victim, fault.c_str(), op);
      work->test();
      std::raise(fault == "sigstop" ? SIGSTOP : SIGKILL);
    }
    work->wait();
  }
  std::printf("[rank %d] all operations completed\n", comm->rank());
  comm.reset();
  MPI_Finalize();
  return 0;
}

// How a rank joins its job: a process started by mpirun or `srun --mpi=pmix` initialises MPI and
// learns its rank, world size and place on its node; outside MPI it is the only rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace rm {

// True when this process was started by an MPI launcher (mpirun, or srun with PMIx).
bool launched_by_mpi();

// MPI_Init on construction (funneled: only the main thread calls MPI; OpenMP threads don't),
// MPI_Finalize on destruction. A null object outside MPI (rank 0 of 1). Never hangs: MPI_Init
// is bounded by the start-up deadline (startup_agreement.h) and MPI_Finalize by 120 s, each
// ending the process with a message (deadline_guard.h); the ranks per host are learnt with a
// polled, non-blocking all-gather (place_on_host).
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Each rank's host, numbered in the order of each host's first rank.
  const std::vector<int>& host_of_rank() const { return host_of_rank_; }
  // The MPI library's first line of MPI_Get_library_version ("Open MPI v4.1.4, ..."), for the
  // run's "started" event; "" if it cannot say.
  static std::string library_version();
  // The world communicator over MPI (shared memory between ranks of one node).
  std::unique_ptr<Communicator> communicator(double timeout_s) const;
  // Where this rank runs: "rank 1/4 (local 1/2) on host, slurm job 123 (nodes), restart 0".
  std::string describe() const;

 private:
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_size_ = 1;
  std::vector<int> host_of_rank_ = {0};
};

// Threads for this rank's kernels and BLAS: parallel.threads_per_rank; or (0) the CPUs Slurm
// gave the task (SLURM_CPUS_PER_TASK, from cluster.cpus_per_task), else the machine's cores
// divided by the ranks sharing it. Returns the number chosen.
int configure_threads(int threads_per_rank, int local_ranks);

}  // namespace rm

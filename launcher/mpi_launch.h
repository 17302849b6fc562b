// Starting ranks: `ringmaster run --nproc N` re-executes itself under mpirun, and a process
// started by mpirun or `srun --mpi=pmix` joins the job through MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace rm {

// True when this process was started by an MPI launcher (mpirun, or srun with PMIx).
bool launched_by_mpi();

// Runs `mpirun -np N <this binary> <args>` as a child and returns its exit code (128 + the
// signal if it was killed). Throws if mpirun cannot be started.
//
// This process stays as a supervisor so that stop signals reach the ranks intact: mpirun
// answers SIGTERM and SIGINT by killing the job (SIGTERM, then SIGKILL a moment later, too
// soon for a checkpoint of any size), but forwards SIGUSR1 untouched. So mpirun runs in its
// own process group (a Ctrl-C in the terminal reaches only this process), and SIGTERM, SIGINT
// and SIGUSR1 received here are passed on to mpirun as SIGUSR1. A second signal of the same
// kind is passed on as SIGKILL to mpirun's process group: the way out of a stuck job. If this
// process dies (even by SIGKILL), mpirun gets SIGTERM (PR_SET_PDEATHSIG) and stops the ranks.
int run_under_mpirun(int nproc, const std::vector<std::string>& args);

// MPI_Init on construction (funneled: only the main thread calls MPI; OpenMP threads don't),
// MPI_Finalize on destruction. A null object outside MPI.
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
  // The world communicator over MPI (shared memory between ranks of one node).
  std::unique_ptr<Communicator> communicator(double timeout_s) const;
  // Where this rank runs: "rank 1/4 (local 1/2) on host, slurm job 123 (nodes), restart 0".
  std::string describe() const;

 private:
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace rm

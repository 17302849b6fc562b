// Starting ranks: `ringmaster run --nproc N` runs itself under mpirun, and a process started by
// mpirun or `srun --mpi=pmix` joins the job through MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace rm {

// True when this process was started by an MPI launcher (mpirun, or srun with PMIx).
bool launched_by_mpi();

// The command line `mpirun -np N --oversubscribe --bind-to none [--allow-run-as-root] <this
// binary> <args>`, to run with run_child() (child_process.h).
std::vector<std::string> mpirun_command(int nproc, const std::vector<std::string>& args);

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

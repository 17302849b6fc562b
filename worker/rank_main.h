// The one entry point of a rank, shared by every way a job starts:
//   - `ringmaster run JOB` on one rank: the supervised child process (no MPI);
//   - `mpirun -np N ringmaster worker JOB` (also what `run --nproc N` starts);
//   - `srun --mpi=pmix ringmaster worker RUN_DIR/config.yaml` in the Slurm batch script.
//
// Every rank checks the job, the data and the run directory (cheap, and they must agree); under
// MPI the ranks agree on the outcome before their first collective, so that a rank that cannot
// start makes every rank leave instead of waiting for it. Rank 0 prepares the run directory and
// writes the resolved job; then all train, resuming from the newest verified checkpoint when the
// run directory holds one. Returns the process exit code (exit_codes.h).
#pragma once

#include <string>
#include <vector>

namespace rm {

struct RankArgs {
  std::string job;                // the YAML job file
  std::vector<std::string> sets;  // --set key.path=value overrides, in order
  int nproc = 1;                  // ranks the command line asked for (checked against MPI's)
  bool fresh = false;             // start over in a run directory that holds a run
  std::string from;               // resume from this checkpoint directory
};

int rank_main(const RankArgs& args);

}  // namespace rm

// `ringmaster run --nproc N [--hosts FILE]` runs itself under mpirun; this builds that command.
#pragma once

#include <string>
#include <vector>

namespace rm {

struct MpiLaunch {
  int nproc = 1;
  // Open MPI hostfile (hostfile.h); empty: every rank on this host.
  std::string hostfile;
  // With a hostfile, variables the ranks need on other hosts, which mpirun would not pass:
  // mpirun hands its own environment only to ranks on its own host (ssh starts the others
  // with a fresh one). Every RM_*, OMP_* and OPENBLAS_* variable, PATH, LD_LIBRARY_PATH and
  // GLIBC_TUNABLES are passed anyway; these are the others (the job's cluster.env).
  std::vector<std::string> extra_env;
};

// `mpirun -np N --oversubscribe --bind-to none [--allow-run-as-root] [--hostfile F -x VAR...]
// <this binary> <args>`, to run with run_child() (child_process.h).
std::vector<std::string> mpirun_command(const MpiLaunch& launch,
                                        const std::vector<std::string>& args);

// The names of the variables `-x` passes for `launch` (those above, as set in this process).
std::vector<std::string> forwarded_env(const std::vector<std::string>& extra_env);

}  // namespace rm

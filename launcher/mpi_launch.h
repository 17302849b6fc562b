// `ringmaster run --nproc N [--hosts FILE]` runs itself under mpirun; this builds that command.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/child_process.h"

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
  // Open MPI's orte_tmpdir_base for this launch (mpi_session_dir.h); empty: Open MPI's default.
  std::string session_base;
};

// `mpirun -np N --oversubscribe --bind-to none [--allow-run-as-root] [--mca orte_tmpdir_base
// B] [--hostfile F -x VAR...] <this binary> <args>`, to run with run_child() (child_process.h).
std::vector<std::string> mpirun_command(const MpiLaunch& launch,
                                        const std::vector<std::string>& args);

// Runs mpirun_command() with run_child() and a session base of its own (new_mpi_session_base()),
// removed when mpirun has ended, as are this host's bases of earlier launches. Returns the exit
// code, as run_child() does (`watch`: see there).
int run_mpirun(MpiLaunch launch, const std::vector<std::string>& args, SignalForwarding forwarding,
               const ChildWatch& watch = {});

// The names of the variables `-x` passes for `launch` (those above, as set in this process).
std::vector<std::string> forwarded_env(const std::vector<std::string>& extra_env);

}  // namespace rm

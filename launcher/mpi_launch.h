// `ringmaster run --nproc N` runs itself under mpirun; this builds that command line.
#pragma once

#include <string>
#include <vector>

namespace rm {

// The command line `mpirun -np N --oversubscribe --bind-to none [--allow-run-as-root] <this
// binary> <args>`, to run with run_child() (child_process.h).
std::vector<std::string> mpirun_command(int nproc, const std::vector<std::string>& args);

}  // namespace rm

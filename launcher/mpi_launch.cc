#include "launcher/mpi_launch.h"

#include <unistd.h>

#include "launcher/child_process.h"

namespace rm {

std::vector<std::string> mpirun_command(int nproc, const std::vector<std::string>& args) {
  // --bind-to none: each rank runs several OpenMP threads, which binding to one core would
  // serialise; --oversubscribe: more ranks than cores is allowed (tests, small machines).
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe",
                                   "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(self_path());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace rm

#include "launcher/mpi_launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "launcher/child_process.h"
#include "launcher/mpi_session_dir.h"

extern char** environ;

namespace rm {

std::vector<std::string> forwarded_env(const std::vector<std::string>& extra_env) {
  static const char* const kPrefixes[] = {"RM_", "OMP_", "OPENBLAS_"};
  static const char* const kNames[] = {"PATH", "LD_LIBRARY_PATH", "GLIBC_TUNABLES"};
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool wanted = std::find(extra_env.begin(), extra_env.end(), name) != extra_env.end();
    for (const char* p : kPrefixes) wanted = wanted || name.rfind(p, 0) == 0;
    for (const char* n : kNames) wanted = wanted || name == n;
    if (wanted) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<std::string> mpirun_command(const MpiLaunch& launch,
                                        const std::vector<std::string>& args) {
  // --bind-to none: each rank runs several OpenMP threads, which binding to one core would
  // serialise; --oversubscribe: more ranks than cores is allowed (tests, small machines).
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(launch.nproc),
                                   "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  // On the command line, so that mpirun passes it to the daemons it starts on other hosts.
  if (!launch.session_base.empty()) {
    argv.insert(argv.end(), {"--mca", "orte_tmpdir_base", launch.session_base});
  }
  if (!launch.hostfile.empty()) {
    // --map-by slot (the default, said for the reader): ranks fill a host before the next, so
    // each host's ranks are consecutive, as the communicator's hierarchical path wants.
    argv.insert(argv.end(), {"--hostfile", launch.hostfile, "--map-by", "slot"});
    for (const std::string& name : forwarded_env(launch.extra_env)) {
      argv.insert(argv.end(), {"-x", name});
    }
  }
  argv.push_back(self_path());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

int run_mpirun(MpiLaunch launch, const std::vector<std::string>& args, SignalForwarding forwarding,
               const ChildWatch& watch) {
  launch.session_base = new_mpi_session_base();
  // Removed however this ends, a throw included; the ended bases of earlier launches here too
  // (ours were removed as they ended; these are another launcher's, killed before it could).
  struct Cleanup {
    std::string base;
    ~Cleanup() {
      remove_mpi_session_base(base);
      sweep_mpi_session_bases(mpi_session_parent(), kEndedSessionBaseAgeS);
      sweep_killed_launch_bases(mpi_session_parent(), kEndedSessionBaseAgeS);
    }
  } cleanup{launch.session_base};
  return run_child(mpirun_command(launch, args), forwarding, watch);
}

}  // namespace rm

#include "launcher/supervisor.h"

#include <cstdio>
#include <cstdlib>

#include "checkpoint/checkpoint_reader.h"
#include "launcher/child_process.h"
#include "launcher/cmd_common.h"
#include "worker/error_report.h"
#include "worker/exit_codes.h"
#include "launcher/mpi_launch.h"
#include "worker/run_events.h"

namespace rm {

std::vector<std::string> restart_arguments(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--fresh" || argv[i].rfind("--fresh=", 0) == 0) continue;
    if (argv[i].rfind("--from=", 0) == 0) continue;
    if (argv[i] == "--from") {
      ++i;  // and its value
      continue;
    }
    out.push_back(argv[i]);
  }
  return out;
}

int supervise(const JobConfig& job, const MpiLaunch& launch, const std::vector<std::string>& argv) {
  const SignalForwarding forwarding =
      job.checkpoint.on_signal ? SignalForwarding::kAsUsr1 : SignalForwarding::kSame;
  const int max_restarts = job.resilience.max_restarts;
  std::vector<std::string> args = argv;
  for (int attempt = 0;; ++attempt) {
    ::setenv(kRestartCountEnv, std::to_string(attempt).c_str(), 1);
    // One rank on this host needs no mpirun; one rank elsewhere does.
    const bool alone = launch.nproc <= 1 && launch.hostfile.empty();
    std::vector<std::string> command =
        alone ? std::vector<std::string>{self_path()} : mpirun_command(launch, args);
    if (alone) command.insert(command.end(), args.begin(), args.end());
    const int code = run_child(command, forwarding);
    if (code == kExitOk || code == kExitBadInput || code == kExitStopped || stop_signal_seen()) {
      return code;
    }
    if (attempt >= max_restarts) {
      if (max_restarts > 0) {
        print_error("the job failed (exit code " + std::to_string(code) + ") after " +
                    std::to_string(max_restarts) + " restart" + (max_restarts == 1 ? "" : "s") +
                    " (resilience.max_restarts); giving up");
      }
      return code;
    }
    args = restart_arguments(argv);
    const auto newest = find_resume_checkpoint(job.run_dir);
    if (!newest) args.push_back("--fresh");
    append_run_event(job.run_dir, "restart",
                     {{"reason", "failed"}, {"exit_code", code}, {"restart", attempt + 1}});
    std::printf("ringmaster: the job failed (exit code %d); restart %d of %d from %s\n", code,
                attempt + 1, max_restarts,
                newest ? newest->path.c_str() : "the beginning (no checkpoint verifies)");
    std::fflush(stdout);
  }
}

}  // namespace rm

#include "launcher/supervisor.h"

#include <cstdio>
#include <cstdlib>

#include "checkpoint/checkpoint_reader.h"
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "launcher/child_process.h"
#include "launcher/cmd_common.h"
#include "launcher/host_check.h"
#include "launcher/hostfile.h"
#include "launcher/mpi_launch.h"
#include "observe/run_events.h"

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

namespace {

// A healthy host takes a process in well under a second; one that has not within this long is
// treated as down.
constexpr double kHostProbeTimeoutS = 15;
// After this host's ranks have exited, how long mpirun may take to follow (child_process.h):
// it normally exits within a second; it lingers when a host it waits for is unreachable.
constexpr double kMpirunLingerS = 20;

std::string join_hosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : ", ") + h;
  return out;
}

double host_wait_s() {
  const char* v = std::getenv("RM_HOST_WAIT_S");
  return v != nullptr && *v != '\0' ? std::atof(v) : kHostWaitS;
}

// With a hostfile: every host must take a process before mpirun starts the job (mpirun would
// wait forever for one that cannot). The first launch fails at once, naming the hosts; a
// restart waits for them to come back, up to host_wait_s(). Returns 0 when all answered,
// else the exit code to leave with.
int wait_for_hosts(const JobConfig& job, const MpiLaunch& launch, bool restart) {
  if (launch.hostfile.empty()) return 0;
  const std::vector<HostSlots> hosts = read_hostfile(launch.hostfile);
  std::vector<std::string> down = unreachable_hosts(hosts, kHostProbeTimeoutS);
  if (down.empty()) return 0;
  const std::string names = join_hosts(down);
  const std::string why = "mpirun could not start a process on " + names + " within " +
                          std::to_string(static_cast<int>(kHostProbeTimeoutS)) +
                          " s (is the host up and reachable from this one?)";
  if (!restart) {
    print_error("host" + std::string(down.size() == 1 ? " " : "s ") + names + " unreachable: " + why);
    return kExitFailure;
  }
  const double limit = host_wait_s();
  std::printf("ringmaster: waiting up to %.0f s for %s to come back (%s)\n", limit, names.c_str(),
              why.c_str());
  std::fflush(stdout);
  append_run_event(job.run_dir, "hosts_unreachable", {{"hosts", down}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 10 && !stop_signal_seen(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (stop_signal_seen()) return kExitStopped;
    down = unreachable_hosts(hosts, kHostProbeTimeoutS);
    if (down.empty()) {
      std::printf("ringmaster: every host answers again\n");
      std::fflush(stdout);
      return 0;
    }
  }
  print_error("gave up after " + std::to_string(static_cast<int>(limit)) + " s: " + join_hosts(down) +
              " still unreachable (" + why + ")");
  return kExitFailure;
}

}  // namespace

int supervise(const JobConfig& job, const MpiLaunch& launch, const std::vector<std::string>& argv) {
  const SignalForwarding forwarding =
      job.checkpoint.on_signal ? SignalForwarding::kAsUsr1 : SignalForwarding::kSame;
  const int max_restarts = job.resilience.max_restarts;
  std::vector<std::string> args = argv;
  for (int attempt = 0;; ++attempt) {
    ::setenv(kRestartCountEnv, std::to_string(attempt).c_str(), 1);
    if (const int code = wait_for_hosts(job, launch, attempt > 0); code != 0) return code;
    // One rank on this host needs no mpirun; one rank elsewhere does.
    const bool alone = launch.nproc <= 1 && launch.hostfile.empty();
    std::vector<std::string> command =
        alone ? std::vector<std::string>{self_path()} : mpirun_command(launch, args);
    if (alone) command.insert(command.end(), args.begin(), args.end());
    const int code = run_child(command, forwarding, launch.hostfile.empty() ? 0 : kMpirunLingerS);
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
    const bool memory = job.checkpoint.memory_every > 0;
    // Without a checkpoint to resume, the run starts over -- unless its ranks may hold newer
    // state in memory (worker/memory_checkpoints.h), which --fresh would discard.
    if (!newest && !memory) args.push_back("--fresh");
    append_run_event(job.run_dir, "restart",
                     {{"reason", "failed"}, {"exit_code", code}, {"restart", attempt + 1}});
    const std::string from =
        newest ? newest->path : "the beginning (no checkpoint verifies)";
    std::printf("ringmaster: the job failed (exit code %d); restart %d of %d from %s%s\n", code,
                attempt + 1, max_restarts, memory ? "memory if newer, else " : "", from.c_str());
    std::fflush(stdout);
  }
}

}  // namespace rm

// `ringmaster run` as a supervisor: it runs the training -- `mpirun -np N ringmaster run ...`
// for N ranks (on this host or across a hostfile's), or `ringmaster run ...` in a child process
// for one -- and restarts it from the newest verified checkpoint when it fails, up to
// resilience.max_restarts times (torchrun's --max-restarts; 0 by default).
//
//   - Not restarted: success (0), bad input (2: it would fail again), a stop by signal (75),
//     and any failure after this process received a stop signal (someone wants it stopped).
//   - A restart drops --fresh and --from from the command line, so it resumes from the newest
//     checkpoint that verifies; with none, it starts over (--fresh: there is nothing to keep).
//   - Every attempt runs with RM_RESTART_COUNT=k in its environment (0 first); ranks log it.
//   - With a hostfile, every host must first take a process (launcher/host_check.h): the first
//     launch fails naming the hosts that do not; a restart goes on without them where the hosts
//     left can take the job (restart_placement.h: their spare slots, or resilience.shrink),
//     writing their hostfile to RUN_DIR/hosts.restart and, when it shrinks, telling the ranks
//     the rank count before (RM_SHRUNK_FROM_RANKS, worker/memory_salvage.h); else it waits for
//     them to come back, up to kHostWaitS (RM_HOST_WAIT_S overrides it), then fails naming them.
//   - Signals: SIGTERM, SIGINT, SIGUSR1 and SIGHUP are passed on (child_process.h) as SIGUSR1, the
//     ranks' "checkpoint and stop", when checkpoint.on_signal (held until rank 0's "started"
//     event says every rank is up), else as they came.
#pragma once

#include <string>
#include <vector>

#include "configs/job_config.h"
#include "launcher/mpi_launch.h"

namespace rm {

// Environment variable set in the supervised process (its value: the restart count), so that
// `ringmaster run` started by the supervisor trains instead of supervising again.
inline constexpr const char* kRestartCountEnv = "RM_RESTART_COUNT";

// How long a restart waits for unreachable hosts to come back (seconds).
inline constexpr double kHostWaitS = 300;

// Runs the job's training (argv: the command line after the program name) until it succeeds,
// stops, or fails more than job.resilience.max_restarts times; returns the last exit code.
int supervise(const JobConfig& job, const MpiLaunch& first_launch,
              const std::vector<std::string>& argv);

// argv without --fresh, --from PATH and --from=PATH (what a restart must not repeat).
std::vector<std::string> restart_arguments(const std::vector<std::string>& argv);

}  // namespace rm

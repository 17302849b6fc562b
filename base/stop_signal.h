// Stopping a run cleanly on a signal (checkpoint.on_signal): Slurm preemption and time limits
// (SIGTERM, or SIGUSR1 from `sbatch --signal=USR1@SECONDS`), Ctrl-C (SIGINT), and the terminal
// or SSH session of `ringmaster run` closing (SIGHUP).
//
// The handler only records the signal; the trainer reads it once per step and the ranks agree
// on it inside the all-reduce that sums the step's loss (no extra collective), so every rank
// stops after the same step even when only one of them was signalled. They then save a
// checkpoint of that step, wait until it is committed and exit with kExitStopped, and running
// the same command again resumes.
//
// A second SIGTERM, SIGINT or SIGHUP takes its default action, so a second Ctrl-C or SIGTERM kills
// a run whose save hangs -- when it comes kStopRepeatWindowNs or more after the first. The same
// signal again within that window is the same stop: machinery delivers one stop several times
// within milliseconds (mpirun passing on the SIGTERM it got beside the one `pkill` sent each
// rank; PR_SET_PDEATHSIG firing once per thread of a dying launcher), and the rank killed by the
// copy lost every step since its last checkpoint. Repeated SIGUSR1s are always one request:
// Slurm's notice can reach a rank twice (scancel --full: directly and through the batch script).
//
// SIGUSR1, the notice that Slurm, the batch script and the supervisor send, is recorded from a
// rank's first instruction (catch_stop_notice_early), before its job is even read: a rank takes
// seconds to minutes to start (MPI, the data, the device, the restore), and a notice that came
// then would otherwise end it (SIGUSR1's default action). A notice recorded while the rank
// started stops it after its first step, like any other. (The batch script and the supervisor
// hold a notice until the ranks are up, launcher/child_process.h: srun and mpirun drop one that
// comes before the ranks exist, and one that reaches a rank before its first instruction ends
// it. This catches a notice sent to the ranks directly.)
#pragma once

#include <cstdint>
#include <string>

namespace rm {

// The same stop signal again within this long is the same stop, not a plea to kill (ranks here,
// `ringmaster run`'s supervisor in launcher/child_process.cc). A person sending it again to kill
// is slower than this; the messages say to.
inline constexpr int64_t kStopRepeatWindowNs = 1'000'000'000;

// A rank's first instruction: records SIGUSR1 from now on. SIGTERM and SIGINT keep their
// default action (a rank killed while it starts has trained nothing to save) until the job says
// what they do: then exactly one of the two calls below.
void catch_stop_notice_early();

// checkpoint.on_signal: installs the handlers for SIGTERM, SIGUSR1, SIGINT and SIGHUP
// (process-wide).
// A SIGUSR1 recorded since catch_stop_notice_early stays recorded.
void install_stop_signal_handlers();

// checkpoint.on_signal false: SIGUSR1 takes its default action again, and one recorded since
// catch_stop_notice_early is raised now, ending the process as it would have when it came.
void release_stop_notice();

// The first stop signal received (SIGTERM, SIGUSR1, SIGINT or SIGHUP), or 0. Async-signal-safe
// read.
int stop_signal_received();

// "SIGTERM", "SIGUSR1", "SIGINT", "SIGHUP", else "signal N".
std::string signal_name(int sig);

}  // namespace rm

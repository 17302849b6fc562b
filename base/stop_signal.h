// Stopping a run cleanly on a signal (checkpoint.on_signal): Slurm preemption and time limits
// (SIGTERM, or SIGUSR1 from `sbatch --signal=USR1@SECONDS`), and Ctrl-C (SIGINT).
//
// The handler only records the signal; the trainer reads it once per step and the ranks agree
// on it inside the all-reduce that sums the step's loss (no extra collective), so every rank
// stops after the same step even when only one of them was signalled. They then save a
// checkpoint of that step, wait until it is committed and exit with kExitStopped, and running
// the same command again resumes.
//
// A second SIGTERM or SIGINT takes its default action (SA_RESETHAND), so a second Ctrl-C or
// SIGTERM still kills a run whose save hangs. Repeated SIGUSR1s are one request: Slurm's notice
// can reach a rank twice (scancel --full: directly and through the batch script).
#pragma once

#include <string>

namespace rm {

// Installs the handlers for SIGTERM, SIGUSR1 and SIGINT (process-wide; call once, before any
// thread is started so that every thread inherits the mask).
void install_stop_signal_handlers();

// The first stop signal received (SIGTERM, SIGUSR1 or SIGINT), or 0. Async-signal-safe read.
int stop_signal_received();

// "SIGTERM", "SIGUSR1", "SIGINT", else "signal N".
std::string signal_name(int sig);

}  // namespace rm

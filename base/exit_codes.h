// Exit codes of the ringmaster command, the same for every subcommand.
#pragma once

#include <string>

namespace rm {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // the job ran and failed (diverged, a rank died, ...)
constexpr int kExitBadInput = 2;  // the job never started: bad job file, data, flags or paths
// Stopped by a signal (checkpoint.on_signal) after saving a checkpoint: run the same command
// again to resume. 75 is EX_TEMPFAIL of sysexits.h ("try again later").
constexpr int kExitStopped = 75;
// And 128 + N: a rank was killed by signal N (137: SIGKILL, often the kernel's OOM killer).

// The signal an exit code says a process died of (128 + N, the shell's convention), as
// "SIGKILL", or "" where it says none: mpirun's own failures exit 255, which is no signal's.
std::string signal_in_exit_code(int code);

// What `run` exits with for an attempt's exit code: the codes above pass on, and so does a
// signal's 128 + N; anything else (mpirun's own 255, a rank's stray exit(3)) is a failed job, 1.
int documented_exit_code(int code);

}  // namespace rm

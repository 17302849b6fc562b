// Exit codes of the ringmaster command, the same for every subcommand.
#pragma once

namespace rm {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // the job ran and failed (diverged, a rank died, ...)
constexpr int kExitBadInput = 2;  // the job never started: bad job file, data, flags or paths
// Stopped by a signal (checkpoint.on_signal) after saving a checkpoint: run the same command
// again to resume. 75 is EX_TEMPFAIL of sysexits.h ("try again later").
constexpr int kExitStopped = 75;

}  // namespace rm

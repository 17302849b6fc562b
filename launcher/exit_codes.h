// Exit codes of the ringmaster command, the same for every subcommand.
#pragma once

namespace rm {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // the job ran and failed (diverged, a rank died, ...)
constexpr int kExitBadInput = 2;  // the job never started: bad job file, data, flags or paths

}  // namespace rm

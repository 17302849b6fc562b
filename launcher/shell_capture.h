// Running a short shell command (sbatch, scontrol, squeue) and capturing what it printed.
#pragma once

#include <string>

namespace rm {

struct CapturedCommand {
  int exit_code = -1;  // 127: not found; 128 + N: killed by signal N
  std::string output;  // stdout and stderr together, trailing newlines removed
};

// Runs `command` with /bin/sh, stdin from /dev/null. The caller quotes every word that is not
// its own (launcher/slurm_script.h shell_quote). Blocks until it exits; wrap it in `timeout N`
// when the command talks to a daemon that may not answer.
CapturedCommand capture_command(const std::string& command);

}  // namespace rm

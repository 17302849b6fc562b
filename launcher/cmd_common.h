// Shared plumbing of the subcommands: error reporting and exit-code mapping, thread setup.
#pragma once

#include <functional>
#include <string>

#include "configs/job_config.h"
#include "launcher/commands.h"

namespace rm {

// Runs a command body and maps what escapes it to one message and an exit code:
// job-file errors (all of them, one per line), data and file errors -> kExitBadInput;
// anything else -> kExitFailure.
int report_errors(const std::function<int()>& body);

// load_job() with the command line's overrides and rank count.
JobConfig load_job_args(const JobArgs& args);

// Threads for this rank's kernels and BLAS: parallel.threads_per_rank, or (0) the machine's
// cores divided by the ranks sharing it. Returns the number chosen.
int configure_threads(const ParallelConfig& parallel, int local_ranks);

}  // namespace rm

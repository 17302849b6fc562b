// Shared plumbing of the subcommands.
#pragma once

#include "configs/job_config.h"
#include "launcher/commands.h"

namespace rm {

// load_job() with the command line's overrides and rank count.
JobConfig load_job_args(const JobArgs& args);

}  // namespace rm

// Shared plumbing of the subcommands.
#pragma once

#include "configs/job_config.h"
#include "launcher/commands.h"
#include "launcher/mpi_launch.h"

namespace rm {

// load_job() with the command line's overrides and rank count.
JobConfig load_job_args(const JobArgs& args);

// How mpirun starts `nproc` ranks for a command with --hosts FILE (or none): with a hostfile and
// no explicit rank count, its slots; more ranks than slots is bad input (JobConfigError naming
// the file). Updates nproc and returns the launch (its extra_env empty).
MpiLaunch resolve_launch(const std::string& hosts, bool nproc_given, int& nproc);

}  // namespace rm

// Shared plumbing of the subcommands.
#pragma once

#include "configs/job_config.h"
#include "launcher/commands.h"
#include "launcher/mpi_launch.h"
#include "planning/memory_fit.h"

namespace rm {

// load_job() with the command line's overrides and rank count.
JobConfig load_job_args(const JobArgs& args);

// How mpirun starts `nproc` ranks for a command with --hosts FILE (or none): with a hostfile and
// no explicit rank count, its slots; more ranks than slots is bad input (JobConfigError naming
// the file). Updates nproc and returns the launch (its extra_env empty).
MpiLaunch resolve_launch(const std::string& hosts, bool nproc_given, int& nproc);

// How many of `nproc` ranks the busiest host runs: nproc without a hostfile; with one, ranks
// fill each host's slots in file order (as mpirun places them).
int ranks_on_busiest_host(const std::string& hosts, int nproc);

// Refuses with JobConfigError a job whose ranks need more memory than a host (or a GPU) has
// (planning/memory_fit.h); returns the estimate. `backend`: what the ranks compute on;
// `capacity` receives what the need was compared with.
MemoryFit check_job_memory(const JobConfig& job, const JobArgs& args, ComputeKind backend,
                           MemoryCapacity& capacity);

// checkpoint.keep_best's link in RUN_DIR (checkpoint/retention.h), for `status` and `ckpt list`:
// "RUN_DIR/checkpoints/best -> step_N (val_loss L at step N)", or what is wrong with what it
// points to; empty where the run keeps no link.
std::string describe_best_checkpoint(const std::string& run_dir);

}  // namespace rm

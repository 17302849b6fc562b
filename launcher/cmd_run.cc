// `ringmaster run JOB [--nproc N]` and `ringmaster worker JOB`.
//
// A rank (worker/rank_main.h) is what mpirun or srun starts (`worker`, or `run` under MPI), and
// what the supervisor starts for a one-rank run. Outside MPI, `run` first checks everything that
// can be checked (job file, data, run directory) before the first byte is written, writes the
// resolved job, and then supervises the training (launcher/supervisor.h: signals, restarts): a
// child process for one rank, or `mpirun -np N` of itself.
#include <unistd.h>

#include <cstdlib>

#include "configs/job_loader.h"
#include "launcher/cmd_common.h"
#include "launcher/supervisor.h"
#include "worker/console_progress.h"
#include "worker/device_select.h"
#include "worker/error_report.h"
#include "worker/exit_codes.h"
#include "worker/mpi_bootstrap.h"
#include "worker/rank_main.h"
#include "worker/run_dir.h"
#include "worker/training_data.h"

namespace rm {

int cmd_run(const RunArgs& args) {
  const RankArgs rank{args.job.job, args.job.sets, args.job.nproc, args.fresh, args.from};
  const bool supervised = std::getenv(kRestartCountEnv) != nullptr;
  if (launched_by_mpi() || (supervised && !args.worker)) return rank_main(rank);
  if (args.worker) {
    print_error("worker: start it with mpirun or srun --mpi=pmix (or use `ringmaster run`)");
    return kExitBadInput;
  }
  return report_errors([&] {
    JobArgs job_args = args.job;
    MpiLaunch launch = resolve_launch(job_args.hosts, job_args.nproc_given, job_args.nproc);
    const JobConfig job = load_job_args(job_args);
    open_training_data(job);
    // Hardware the job needs and this machine lacks is bad input: said here, before the run
    // directory is touched (the ranks choose again, each for itself).
    const DeviceChoice device = choose_device(job.parallel.backend, 0, job_args.nproc);
    // So is a job that needs more memory than the host (or a GPU) has: refused with the
    // estimate and what would fit, instead of a std::bad_alloc mid-start (memory_fit.h).
    MemoryCapacity capacity;
    check_job_memory(job, job_args, device.kind, capacity);
    prepare_run(job, args.fresh);
    // cluster.env is for every rank, here as under `submit`; the ranks inherit it.
    for (const auto& [name, value] : job.cluster.env) {
      ::setenv(name.c_str(), value.c_str(), 1);
      launch.extra_env.push_back(name);
    }
    // The ranks' stdout is mpirun's pipe: tell rank 0 whether the console is a terminal, for
    // its progress line (console_progress.h). Not if the caller already said.
    ::setenv(kConsoleTtyEnv, ::isatty(STDOUT_FILENO) == 1 ? "1" : "0", 0);
    return supervise(job, launch, args.argv);
  });
}

}  // namespace rm

// `ringmaster run JOB [--nproc N]` and `ringmaster worker JOB`.
//
// A rank (worker/rank_main.h) is what mpirun or srun starts (`worker`, or `run` under MPI), and
// what the supervisor starts for a one-rank run. Outside MPI, `run` first checks everything that
// can be checked (job file, data, run directory) before the first byte is written, writes the
// resolved job, and then supervises the training (launcher/supervisor.h: signals, restarts): a
// child process for one rank, or `mpirun -np N` of itself.
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/run_dir.h"
#include "base/stop_signal.h"
#include "launcher/cmd_common.h"
#include "launcher/mpi_session_dir.h"
#include "launcher/supervisor.h"
#include "observe/console_progress.h"
#include "worker/job_preparation.h"
#include "worker/mpi_bootstrap.h"
#include "worker/rank_main.h"

namespace rm {

int cmd_run(const RunArgs& args) {
  const RankArgs rank{args.job.job, args.job.sets, args.job.nproc, args.fresh, args.from};
  const bool supervised = std::getenv(kRestartCountEnv) != nullptr;
  if (launched_by_mpi() || (supervised && !args.worker)) {
    // First of all: a stop notice that comes while the rank starts is kept for its first step.
    catch_stop_notice_early();
    sweep_mpi_session_bases_from_rank();
    return rank_main(rank);
  }
  if (args.worker) {
    print_error("worker: start it with mpirun or srun --mpi=pmix (or use `ringmaster run`)");
    return kExitBadInput;
  }
  return report_errors([&] {
    JobArgs job_args = args.job;
    MpiLaunch launch = resolve_launch(job_args.hosts, job_args.nproc_given, job_args.nproc);
    // The job, its data, the device it needs and the memory of the busiest host: the checks
    // each rank runs again for itself (worker/job_preparation.h), here before the run directory
    // is touched -- bad input is said once, not by N ranks, and nothing is written.
    JobPlacement where;
    where.ranks = job_args.nproc;
    where.ranks_here = ranks_on_busiest_host(job_args.hosts, job_args.nproc);
    where.verifies_initial_weights = true;
    where.fresh = args.fresh;
    where.from_given = !args.from.empty();
    const CheckedJob checked = check_job(job_args.job, job_args.sets, where);
    const JobConfig& job = checked.job;
    check_resume_source(job, args.from, args.fresh);
    std::string changes;
    prepare_run_directory(
        job, args.fresh, &changes,
        args.from.empty() ? FinishedRunJudge::kChecksums : FinishedRunJudge::kNone);
    if (!changes.empty()) std::printf("ringmaster: %s\n", changes.c_str());
    // cluster.env is for every rank, here as under `submit`; the ranks inherit it.
    for (const auto& [name, value] : job.cluster.env) {
      ::setenv(name.c_str(), value.c_str(), 1);
      launch.extra_env.push_back(name);
    }
    // The ranks' stdout is mpirun's pipe: tell rank 0 whether the console is a terminal, for
    // its progress line (console_progress.h). Not if the caller already said.
    ::setenv(kConsoleTtyEnv, ::isatty(STDOUT_FILENO) == 1 ? "1" : "0", 0);
    // Output that cannot be shown must not end the training: `run ... | tee log` and Ctrl-C
    // kill tee too, and the supervisor's next line (or mpirun's, passing on a rank's) died of
    // SIGPIPE, the ranks with it, before their stop checkpoint. Ignored here and in what it
    // starts (the disposition survives exec): a write to the broken pipe fails instead.
    ::signal(SIGPIPE, SIG_IGN);
    return supervise(job, launch, args.argv);
  });
}

}  // namespace rm

// `ringmaster run JOB [--nproc N]` and `ringmaster worker JOB`.
//
// Outside MPI, `run` checks everything that can be checked (job file, data, run directory)
// before the first byte is written, writes the resolved job, and then either trains in a
// child process (N = 1) or runs itself under `mpirun -np N`, supervising either
// (launcher/supervisor.h: signals, restarts). Under MPI (mpirun, or srun
// --mpi=pmix), every rank repeats the checks (cheap, and they must agree), the ranks agree on
// the outcome before any collective, and then train together.
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "checkpoint/atomic_file.h"
#include "checkpoint/weights_file.h"
#include "collectives/self_communicator.h"
#include "configs/job_loader.h"
#include "launcher/cmd_common.h"
#include "launcher/exit_codes.h"
#include "launcher/mpi_launch.h"
#include "launcher/run_dir.h"
#include "launcher/supervisor.h"
#include "worker/stop_signal.h"
#include "worker/trainer.h"

namespace rm {
namespace {

void write_resolved_job(const JobConfig& job) {
  const std::string resolved = to_yaml(job);
  write_file_atomic(run_file(job.run_dir, "config.yaml"), resolved.data(), resolved.size());
}

std::string sigabbrev(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "signal " + std::to_string(sig);
  }
}

bool prepare(const JobConfig& job, const RunArgs& args) {
  const bool resuming = prepare_run_dir(job.run_dir, args.fresh, to_yaml(job));
  write_resolved_job(job);
  return resuming || !args.from.empty();
}

// `where` describes rank 0's place (host, Slurm job, restart count) for the log.
int train(const JobConfig& job, TrainingData& data, Communicator& comm, int local_ranks,
          const std::string& where, bool resuming, const std::string& from) {
  const bool rank0 = comm.rank() == 0;
  const int threads = configure_threads(job.parallel, local_ranks);
  if (job.checkpoint.on_signal) install_stop_signal_handlers();
  Trainer trainer(job, data, comm, {rank0, nullptr});
  trainer.enable_checkpoints(to_yaml(job));
  const int64_t steps_done = resuming ? trainer.resume(from) : 0;
  std::unique_ptr<MetricsLog> metrics;
  if (rank0) {
    metrics = std::make_unique<MetricsLog>(run_file(job.run_dir, "metrics.jsonl"), steps_done);
    trainer.set_metrics(metrics.get());
    std::printf("ringmaster: job '%s' | %s %.2fM parameters | %lld steps x %d samples x %d "
                "tokens | %d rank%s x %d threads, shard %s | run_dir %s\n",
                job.name.c_str(), job.model.type.c_str(),
                trainer.model().layout().size() / 1e6, static_cast<long long>(job.train.steps),
                job.train.global_batch, job.model.seq_len, comm.size(),
                comm.size() == 1 ? "" : "s", threads, job.parallel.shard.c_str(),
                job.run_dir.c_str());
    if (!where.empty()) std::printf("ringmaster: %s\n", where.c_str());
    std::fflush(stdout);
  }
  const Trainer::Outcome outcome = trainer.run();
  trainer.wait_for_checkpoints();
  if (outcome == Trainer::Outcome::kStopped) {
    // Every rank leaves with the same code, after rank 0 has committed the checkpoint: under
    // mpirun a rank that exits early with a non-zero code gets the others killed.
    comm.barrier();
    if (rank0) {
      const int sig = trainer.stop_signal();
      std::printf("ringmaster: stopped by %s after step %lld; checkpoint saved; run the same "
                  "command again to resume\n",
                  sig != 0 ? sigabbrev(sig).c_str() : "a signal (first seen on another rank)",
                  static_cast<long long>(trainer.next_step()));
      std::fflush(stdout);
    }
    return kExitStopped;
  }
  const std::vector<float> params = trainer.state().full_params();
  if (rank0) {
    const std::string weights = run_file(job.run_dir, "weights.bin");
    save_weights(weights, params.data(), params.size());
    std::printf("ringmaster: done; weights in %s\n", weights.c_str());
  }
  comm.barrier();
  return kExitOk;
}

int run_single_or_launch(const RunArgs& args) {
  const JobConfig job = load_job_args(args.job);
  TrainingData data = open_training_data(job);
  const bool resuming = prepare(job, args);
  if (std::getenv(kRestartCountEnv) == nullptr) return supervise(job, args.job.nproc, args.argv);
  // The supervised process of a one-rank run.
  auto comm = make_self_communicator();
  return train(job, data, *comm, 1, "", resuming, args.from);
}

int run_as_rank(const RunArgs& args) {
  MpiSession mpi;
  set_error_prefix("[rank " + std::to_string(mpi.rank()) + "] ");
  JobArgs job_args = args.job;
  if (job_args.nproc != 1 && job_args.nproc != mpi.world()) {
    print_error("--nproc " + std::to_string(job_args.nproc) + " but MPI started " +
                std::to_string(mpi.world()) + " ranks");
    return kExitBadInput;
  }
  job_args.nproc = mpi.world();
  JobConfig job;
  TrainingData data;
  int resuming = 0;
  int status = report_errors([&] {
    job = load_job_args(job_args);
    data = open_training_data(job);
    if (mpi.rank() == 0) resuming = prepare(job, args) ? 1 : 0;
    return kExitOk;
  });
  // Agree before the first collective of training: if any rank failed its checks, every rank
  // leaves now (the failing ones have said why) instead of waiting for it in a collective.
  int worst = status;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst != kExitOk) return worst;
  MPI_Bcast(&resuming, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return report_errors([&] {
    auto comm = mpi.communicator(job.parallel.timeout_s);
    return train(job, data, *comm, mpi.local_size(), mpi.describe(), resuming != 0, args.from);
  });
}

}  // namespace

int cmd_run(const RunArgs& args) {
  if (launched_by_mpi()) return run_as_rank(args);
  if (args.worker) {
    print_error("worker: start it with mpirun or srun --mpi=pmix (or use `ringmaster run`)");
    return kExitBadInput;
  }
  return report_errors([&] { return run_single_or_launch(args); });
}

}  // namespace rm

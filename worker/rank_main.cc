#include "worker/rank_main.h"

#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <memory>

#include "checkpoint/weights_file.h"
#include "collectives/self_communicator.h"
#include "configs/job_loader.h"
#include "worker/error_report.h"
#include "worker/exit_codes.h"
#include "worker/mpi_bootstrap.h"
#include "worker/rank_log.h"
#include "worker/run_dir.h"
#include "worker/stop_signal.h"
#include "worker/trainer.h"

namespace rm {
namespace {

std::string sigabbrev(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return "signal " + std::to_string(sig);
  }
}

// Rank 0 only: prepares the run directory; true when the run resumes from a checkpoint.
bool prepare(const JobConfig& job, const RankArgs& args) {
  const RunStart start = prepare_run(job, args.fresh);
  if (start == RunStart::kRestartUnfinished) {
    std::printf(
        "ringmaster: %s holds an unfinished run of this job that saved no checkpoint; "
        "starting it again from step 0\n",
        job.run_dir.c_str());
    std::fflush(stdout);
  }
  return start == RunStart::kResume || !args.from.empty();
}

// `where` describes rank 0's place (host, Slurm job, restart count) for the log.
int train(const JobConfig& job, TrainingData& data, Communicator& comm, int local_ranks,
          const std::string& where, bool resuming, const std::string& from) {
  const bool rank0 = comm.rank() == 0;
  start_rank_log(job.run_dir, comm.rank());
  const int threads = configure_threads(job.parallel.threads_per_rank, local_ranks);
  if (job.checkpoint.on_signal) install_stop_signal_handlers();
  Trainer trainer(job, data, comm, {rank0, nullptr});
  trainer.enable_checkpoints(to_yaml(job));
  const int64_t steps_done = resuming ? trainer.resume(from) : 0;
  std::unique_ptr<MetricsLog> metrics;
  if (rank0) {
    metrics = std::make_unique<MetricsLog>(run_file(job.run_dir, "metrics.jsonl"), steps_done);
    trainer.set_metrics(metrics.get());
    std::printf(
        "ringmaster: job '%s' | %s %.2fM parameters | %lld steps x %d samples x %d "
        "tokens | %d rank%s x %d threads, shard %s | run_dir %s\n",
        job.name.c_str(), job.model.type.c_str(), trainer.model().layout().size() / 1e6,
        static_cast<long long>(job.train.steps), job.train.global_batch, job.model.seq_len,
        comm.size(), comm.size() == 1 ? "" : "s", threads, job.parallel.shard.c_str(),
        job.run_dir.c_str());
  }
  // Every rank says where it runs: rank 0 on the console, the others in their rank log only.
  if (!where.empty()) std::printf("ringmaster: %s\n", where.c_str());
  std::fflush(stdout);
  const Trainer::Outcome outcome = trainer.run();
  trainer.wait_for_checkpoints();
  if (outcome == Trainer::Outcome::kStopped) {
    // Every rank leaves with the same code, after rank 0 has committed the checkpoint: under
    // mpirun a rank that exits early with a non-zero code gets the others killed.
    comm.barrier();
    if (rank0) {
      const int sig = trainer.stop_signal();
      std::printf(
          "ringmaster: stopped by %s after step %lld; checkpoint saved; run the same "
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

int run_alone(const RankArgs& args) {
  return report_errors([&] {
    const JobConfig job = load_job(args.job, args.sets, args.nproc);
    TrainingData data = open_training_data(job);
    const bool resuming = prepare(job, args);
    auto comm = make_self_communicator();
    return train(job, data, *comm, 1, "", resuming, args.from);
  });
}

int run_with_mpi(const RankArgs& args) {
  MpiSession mpi;
  set_error_prefix("[rank " + std::to_string(mpi.rank()) + "] ");
  if (args.nproc != 1 && args.nproc != mpi.world()) {
    print_error("--nproc " + std::to_string(args.nproc) + " but MPI started " +
                std::to_string(mpi.world()) + " ranks");
    return kExitBadInput;
  }
  JobConfig job;
  TrainingData data;
  int resuming = 0;
  int status = report_errors([&] {
    job = load_job(args.job, args.sets, mpi.world());
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

int rank_main(const RankArgs& args) {
  return launched_by_mpi() ? run_with_mpi(args) : run_alone(args);
}

}  // namespace rm

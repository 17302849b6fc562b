#include "worker/rank_main.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "base/elapsed.h"
#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/input_error.h"
#include "base/run_dir.h"
#include "base/run_lock.h"
#include "base/stop_signal.h"
#include "checkpoint/checkpoint_error.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/weights_file.h"
#include "configs/job_loader.h"
#include "io/atomic_file.h"
#include "io/io_error.h"
#include "io/posix_io.h"
#include "kernels/compute_factory.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fma_peak.h"
#include "observe/console_progress.h"
#include "observe/rank_log.h"
#include "observe/run_events.h"
#include "planning/gemm_rate.h"
#include "worker/checkpoint_line.h"
#include "worker/fault_injection.h"
#include "worker/job_preparation.h"
#include "worker/memory_checkpoints.h"
#include "worker/mpi_bootstrap.h"
#include "worker/rank_devices.h"
#include "worker/startup_agreement.h"
#include "worker/step_agreement.h"
#include "worker/trainer.h"

namespace rm {
namespace {

// Once training has started, an I/O failure (a full disk, a lost mount) is a failure of the run,
// exit 1, which `resilience.max_restarts` and Slurm requeues retry -- not bad input (exit 2,
// which report_errors gives IoError: before the run starts it means a bad path).
template <typename Body>
int run_time(Body body) {
  try {
    return body();
  } catch (const IoError& e) {
    throw std::runtime_error(e.what());
  }
}

// How a run starts, as rank 0 found its directory.
enum StartKind : int {
  kStartNew = 0,         // nothing there, or --fresh: an earlier run's memory segments go
  kStartResume = 1,      // a disk checkpoint (or --from)
  kStartUnfinished = 2,  // a run that saved no disk checkpoint: memory may hold its state
  kStartGoesOn = 3,      // --from a checkpoint the run's line already goes on from: a resume
};

// Rank 0 only: prepares the run directory.
StartKind prepare(const JobConfig& job, const RankArgs& args) {
  // Bad input first, before anything is written; then what to do with --from, decided again on
  // what the run lock guards (a job of the run being requeued may commit a checkpoint until its
  // ranks are gone, which taking the lock waits for).
  check_resume_source(job, args.from, args.fresh);
  own_run_dir(job.run_dir);
  const FromUse from = check_resume_source(job, args.from, args.fresh);
  std::string changes;  // said here when the worker runs alone (`run` has said it before mpirun)
  // A finished run is judged before it resumes (worker/finished_run.h) -- here by rank 0 unless
  // `ringmaster run` judged it just now, holding the run's lock since: its first attempt. By its
  // structure alone, the other ranks waiting: the resume reads the checkpoint with every rank.
  const char* attempt = std::getenv("RM_RESTART_COUNT");
  const bool judged = attempt != nullptr && std::atoi(attempt) == 0;
  const RunStart start = prepare_run_directory(
      job, args.fresh, &changes,
      args.from.empty() && !judged ? FinishedRunJudge::kStructure : FinishedRunJudge::kNone);
  if (!changes.empty()) std::printf("ringmaster: %s\n", changes.c_str());
  if (start == RunStart::kRestartUnfinished && args.from.empty()) {
    std::printf("ringmaster: %s holds an unfinished run of this job that saved no checkpoint on "
                "disk; %s\n",
                job.run_dir.c_str(),
                job.checkpoint.memory_every > 0 ? "looking for its in-memory checkpoints"
                                                 : "starting it again from step 0");
    std::fflush(stdout);
  }
  if (from == FromUse::kGoesOn) {
    std::printf(
        "ringmaster: --from %s: the run's newest checkpoint goes on from it already "
        "(it was started from it before): resuming the run, as without --from\n",
        args.from.c_str());
    std::fflush(stdout);
    return kStartGoesOn;
  }
  if (from == FromUse::kLineGoesOn) {
    std::printf(
        "ringmaster: --from %s: the run's line began there and has saved no checkpoint "
        "on disk yet: going on with it (%s)\n",
        args.from.c_str(),
        job.checkpoint.memory_every > 0 ? "from memory if it holds a step, else from there"
                                        : "from there again");
    std::fflush(stdout);
    return kStartGoesOn;
  }
  if (start == RunStart::kResume || !args.from.empty()) return kStartResume;
  return start == RunStart::kRestartUnfinished ? kStartUnfinished : kStartNew;
}

// The "started" event's fields: what runs, where, and built from what.
// peak_flops: rank 0's measured FMA peak (cpu backend; 0 otherwise).
nlohmann::json started_fields(const JobConfig& job, int ranks, int threads,
                              const DeviceChoice& choice, const MpiSession* mpi,
                              int64_t steps_done, double peak_flops) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
  const char* restart = std::getenv("RM_RESTART_COUNT");
  if (restart == nullptr) restart = std::getenv("SLURM_RESTART_COUNT");
  nlohmann::json f = {
      {"ranks", ranks},
      {"threads_per_rank", threads},
      {"host", host},  // rank 0's
      {"hosts", nodelist != nullptr ? nodelist : host},
      {"ranks_per_host", mpi != nullptr ? mpi->local_size() : 1},
      {"backend", choice.kind == ComputeKind::kCpu ? "cpu" : "cuda"},
      {"shard", choice_name(job.parallel.shard)},
      // Beside ranks: what sums a step's gradients in its order (a resume may change it).
      {"micro_batch", job.train.micro_batch},
      {"precision", choice_name(job.parallel.precision)},
      {"recompute", job.model.recompute},
      {"classifier_chunk_tokens", job.model.classifier_chunk_tokens},
      {"dropout", job.model.dropout},
      {"from_step", steps_done},
      {"restart", restart != nullptr ? std::atoi(restart) : 0},
      {"versions",
       {{"ringmaster", RM_GIT_COMMIT},
        {"compiler", __VERSION__},
        {"cpu_arch", cpu::build_isa_summary()},
        {"mpi", mpi != nullptr ? MpiSession::library_version() : "none (one process)"}}}};
  if (const char* job_id = std::getenv("SLURM_JOB_ID")) f["slurm_job_id"] = job_id;
  if (choice.kind == ComputeKind::kCpu) {
    // What the run's speed is to be judged against: the CPU, the BLAS kernels (and why those),
    // and the measured FMA peak of one rank's threads (kernels/cpu/fma_peak.h).
    const cpu::CpuFeatures& c = cpu::host_cpu_features();
    f["cpu"] = {{"model", c.summary()},
                {"blas", cpu::blas_description()},
                {"blas_core", cpu::blas_core_name()},
                {"peak_gflops_per_rank", std::round(peak_flops / 1e8) / 10}};
  }
  return f;
}

// Rank 0's console. On a terminal with the cpu backend it first times sgemm at the job's own
// GEMM shapes (one micro-batch's, 3 runs each: well under a second for the shipped jobs), the
// baseline of the progress line's MFU; peak_flops is the other one (0: none).
std::unique_ptr<ConsoleProgress> make_console(const JobConfig& job, const Model& model,
                                              const DeviceChoice& choice, int ranks,
                                              double peak_flops) {
  const bool terminal = console_is_terminal();
  const double flops_per_step =
      model.train_flops_per_sample() * job.train.global_batch / std::max(1, ranks);
  double rate = 0;
  if (terminal && choice.kind == ComputeKind::kCpu) {
    rate = sgemm_rate(model.train_gemms(job.train.micro_batch), 3);
  }
  return std::make_unique<ConsoleProgress>(job.train.steps, terminal, flops_per_step, rate,
                                           peak_flops);
}

// "ringmaster: " and, on other ranks than 0, "rank R: ": for lines every host's first rank may
// print.
std::string said_by(int rank) {
  return rank == 0 ? "ringmaster: " : "ringmaster: rank " + std::to_string(rank) + ": ";
}

// Removes the run's segments of memory checkpoints (worker/memory_checkpoints.h) that this
// attempt would find stale, on one rank a host.
void drop_stale_memory_checkpoints(Trainer& trainer, const JobConfig& job, const MpiSession* mpi,
                                   StartKind start, bool new_line) {
  // A resume --from an older checkpoint starts a line of its own (Checkpointing::resume): what
  // memory holds is of the line it leaves, which a restart (without --from) would go back to.
  if (start == kStartNew || new_line) trainer.discard_memory_checkpoints();
  // An attempt that keeps no checkpoints in memory makes any the run's earlier attempts left
  // stale the moment it trains (a later attempt with them on would restore one: steps lost from
  // metrics.jsonl, two attempts' states mixed); a new run's and a new line's too, whatever
  // layout left them. No rank has opened one yet (a save creates it, after the first step's
  // collectives, which wait for this), so none in use goes.
  if ((start == kStartNew || new_line || job.checkpoint.memory_every == 0) &&
      (mpi == nullptr || mpi->local_rank() == 0)) {
    const std::string removed = remove_run_memory_checkpoints(job.run_dir);
    if (!removed.empty()) {
      std::printf("%s%s (this attempt keeps none, or starts anew)\n",
                  said_by(mpi != nullptr ? mpi->rank() : 0).c_str(), removed.c_str());
      std::fflush(stdout);
    }
  }
}

// Brings the trainer to where the run stands: a checkpoint's state (disk or memory), or
// model.init_from's weights at a run's first start. Returns the steps done.
int64_t restore(Trainer& trainer, const JobConfig& job, StartKind start, const std::string& from,
                const std::string& line_start, bool rank0) {
  const bool resuming = start == kStartResume || start == kStartGoesOn ||
                        (start == kStartUnfinished && job.checkpoint.memory_every > 0);
  const int64_t steps_done = resuming ? trainer.resume(from, line_start) : 0;
  // A start at step 0 (nothing to resume; memory held nothing) trains no line a --from began: a
  // line.json left by one that never saved would name the steps memory will hold as that line's,
  // and the same --from later would go on from them (FromUse::kLineGoesOn).
  if (rank0 && steps_done == 0) forget_line_start(job.run_dir);
  // A --from at or past this job's end (another run's late step, or a smaller train.steps): the
  // run ends at once with that checkpoint's weights. Said, or all the user sees is "done".
  if (rank0 && !from.empty() && steps_done >= job.train.steps) {
    std::printf(
        "ringmaster: --from %s: its step %lld is at or past train.steps (%lld): no step to "
        "train, the run ends with its weights (a larger train.steps trains on from it)\n",
        from.c_str(), static_cast<long long>(steps_done), static_cast<long long>(job.train.steps));
    std::fflush(stdout);
  }
  // A finished run extended (a larger train.steps) is unfinished again once it has resumed: its
  // weights.bin, the earlier end's, would be what eval, sample and ckpt export read of it while
  // it trains on (they take the newest checkpoint of an unfinished run). That end is in the
  // checkpoint just resumed from (resume() refuses a run whose end's checkpoint does not
  // verify), and the run writes weights.bin again when it ends.
  if (rank0 && steps_done > 0 && steps_done < job.train.steps) {
    const std::string weights = run_file(job.run_dir, "weights.bin");
    if (io::exists(weights)) {
      io::remove_tree(weights);
      // Resumed from its own newest checkpoint, the run's end is the step it resumed from (the
      // resume refuses any other); from --from, an earlier step: the end is not known here.
      const std::string end = from.empty() && line_start.empty()
                                  ? "of the run's end at step " + std::to_string(steps_done)
                                  : std::string("of the run's earlier end");
      std::printf(
          "ringmaster: weights.bin, %s, is removed until it ends again (eval, sample and ckpt "
          "export read its newest checkpoint meanwhile)\n",
          end.c_str());
      std::fflush(stdout);
    }
  }
  // --from: the line it begins, recorded, and the run's checkpoints past it removed -- after
  // weights.bin, or a crash between would leave an end newer than every checkpoint left.
  if (resuming) trainer.begin_line();
  // model.init_from: at a run's first start only. A run that resumed goes on from its own
  // weights; a restart before its first checkpoint starts from init_from again.
  if (!job.model.init_from.empty()) {
    if (steps_done == 0) {
      trainer.load_initial_weights();
    } else if (rank0) {
      std::printf("ringmaster: model.init_from not read: the run goes on from its own step %lld\n",
                  static_cast<long long>(steps_done));
      std::fflush(stdout);
    }
  }
  return steps_done;
}

// Rank 0: opens metrics.jsonl (kept to steps_done's lines), writes the "started" event and says
// what the job is on the console.
std::unique_ptr<MetricsLog> announce_start(Trainer& trainer, const JobConfig& job,
                                           const Communicator& comm, const MpiSession* mpi,
                                           const DeviceChoice& choice, int threads,
                                           int64_t steps_done, double restore_s,
                                           double peak_flops) {
  auto metrics = std::make_unique<MetricsLog>(run_file(job.run_dir, "metrics.jsonl"), steps_done);
  trainer.set_metrics(metrics.get());
  nlohmann::json started =
      started_fields(job, comm.size(), threads, choice, mpi, steps_done, peak_flops);
  // How long this start took, for the recovery figures (scripts/bench-recovery.sh): since rank
  // 0's process began (MPI start, set-up and restore), and of that the restore. Both to the
  // microsecond: a small model's restore can take under a millisecond, which rounded to
  // milliseconds said 0, as if nothing had been restored; and at the same precision the
  // restore can never read as longer than the start-up that contains it.
  const auto to_us = [](double s) { return std::round(s * 1e6) / 1e6; };
  if (const double age = process_age_s(); age >= 0) started["startup_s"] = to_us(age);
  started["restore_s"] = to_us(restore_s);
  append_run_event(job.run_dir, "started", started);
  std::printf(
      "ringmaster: job '%s' | %s %.2fM parameters | %lld steps x %d samples x %d "
      "tokens | %d rank%s x %d threads, shard %s, %s%s | run_dir %s\n",
      job.name.c_str(), choice_name(job.model.type), trainer.model().layout().size() / 1e6,
      static_cast<long long>(job.train.steps), job.train.global_batch, job.model.seq_len,
      comm.size(), comm.size() == 1 ? "" : "s", threads, choice_name(job.parallel.shard),
      choice_name(job.parallel.precision),
      job.parallel.grad_reduce == Precision::kBf16 ? ", gradients reduced in bf16" : "",
      job.run_dir.c_str());
  return metrics;
}

// `where` describes rank 0's place (host, Slurm job, restart count) for the log. mpi is null
// for a lone process.
int train(const JobConfig& job, TrainingData& data, const MpiSession* mpi,
          const DeviceChoice& choice, const std::string& where, StartKind start,
          const std::string& from_arg) {
  // The checkpoint to resume from (--from), and the line's start when the run goes on from it.
  const std::string from = start == kStartGoesOn ? "" : from_arg;
  const std::string line_start = start == kStartGoesOn ? from_arg : "";
  const int rank = mpi != nullptr ? mpi->rank() : 0;
  const bool rank0 = rank == 0;
  // While this rank lives no new run takes the directory, even if its launcher is gone.
  hold_rank_lock(job.run_dir);
  start_rank_log(job.run_dir, rank);
  const int threads =
      configure_threads(job.parallel.threads_per_rank, mpi != nullptr ? mpi->local_size() : 1);
  const RankDevices devices = make_rank_devices(choice, threads, job.parallel.timeout_s, mpi);
  Communicator& comm = devices.comm();
  // SIGUSR1 has been recorded since the rank began (launcher/cmd_run.cc); now the job says what
  // the stop signals do.
  if (job.checkpoint.on_signal) {
    install_stop_signal_handlers();
  } else {
    release_stop_notice();
  }
  TrainerOptions options;
  options.verbose = rank0;
  options.compute = devices.compute.get();
  options.host_comm = devices.host_comm.get();
  if (mpi != nullptr) options.host_of_rank = mpi->host_of_rank();
  // One rank a host clears what crashed runs left in its /dev/shm once their directory is gone,
  // whether or not this job keeps checkpoints in memory: nothing else would before a reboot.
  if (mpi == nullptr || mpi->local_rank() == 0) {
    const std::string swept = remove_orphaned_memory_checkpoints();
    if (!swept.empty()) {
      std::printf("%s%s\n", said_by(rank).c_str(), swept.c_str());
      std::fflush(stdout);
    }
  }
  bool training = false;  // the steps have begun (a "started" event is written)
  try {
    Trainer trainer(job, data, comm, options);
    trainer.enable_checkpoints(to_yaml(job));
    drop_stale_memory_checkpoints(trainer, job, mpi, start, !from.empty());
    const auto restore_began = std::chrono::steady_clock::now();
    const int64_t steps_done = restore(trainer, job, start, from, line_start, rank0);
    const double restore_s = steps_done > 0 ? seconds_since(restore_began) : 0;
    // Rank 0 measures the cores' FMA peak once (~50 ms) for the started event and the console.
    const double peak_flops =
        rank0 && choice.kind == ComputeKind::kCpu
            ? cpu::measure_fma_peak(cpu::host_cpu_features(), threads).flops_per_s
            : 0;
    std::unique_ptr<MetricsLog> metrics;
    if (rank0) {
      metrics = announce_start(trainer, job, comm, mpi, choice, threads, steps_done, restore_s,
                               peak_flops);
      if (const std::string note = validation_repeats(job, data); !note.empty()) {
        std::printf("ringmaster: note: %s\n", note.c_str());
      }
    }
    // Every rank says where it runs and on what: rank 0 on the console, the others in their rank
    // log only.
    std::printf("ringmaster: %s%scompute %s (%s)\n", where.c_str(), where.empty() ? "" : ", ",
                devices.compute->describe().c_str(), choice.reason.c_str());
    if (rank0 && comm.size() > 1)
      std::printf("ringmaster: collectives %s\n", comm.describe().c_str());
    std::fflush(stdout);
    std::unique_ptr<ConsoleProgress> console;
    if (rank0) console = make_console(job, trainer.model(), choice, comm.size(), peak_flops);
    trainer.set_console(console.get());
    training = true;
    const Trainer::Outcome outcome = trainer.run();
    if (console) console->clear();
    trainer.wait_for_checkpoints();
    // Every rank's part is written and, once rank 0 is here too, committed: the disk now holds
    // this step, and the segments would only hold memory. Not before (this sum waits for every
    // rank): a rank 0 that died committing would leave a restart none of the step in memory but
    // its own. Nor when a save failed and was let pass (checkpoint.on_error: continue): the disk
    // may lack the end's step, which memory holds.
    double failed_saves = trainer.failed_checkpoint_saves();
    devices.host_comm->all_reduce(&failed_saves, 1, DType::kFloat64, ReduceOp::kSum)->wait();
    if (failed_saves == 0) {
      trainer.discard_memory_checkpoints();
      // ...and those an earlier layout of the job left (a run shrunk onto fewer ranks).
      comm.barrier();
      if (mpi == nullptr || mpi->local_rank() == 0) remove_run_memory_checkpoints(job.run_dir);
    } else if (rank0) {
      // Every rank's saves are done (the sum waited for each): what a failed one left -- the
      // shard of a rank that wrote it after rank 0 had given up on its step -- can go now.
      // Best effort: the training is done, and the next start removes it anyway.
      try {
        remove_incomplete_checkpoints(job.run_dir);
      } catch (const IoError& e) {
        std::fprintf(stderr, "ringmaster: warning: scratch of a failed save left: %s\n", e.what());
      }
      if (job.checkpoint.memory_every > 0) {
        // No count: the sum is of each rank's, and a rank may count another's failed part of
        // the same save.
        std::printf(
            "ringmaster: in-memory checkpoints kept: a checkpoint save failed in this attempt "
            "(checkpoint.on_error: continue)\n");
        std::fflush(stdout);
      }
    }
    if (outcome == Trainer::Outcome::kStopped) {
      // Every rank leaves with the same code, after rank 0 has committed the checkpoint: under
      // mpirun a rank that exits early with a non-zero code gets the others killed.
      comm.barrier();
      // The stop's checkpoint may have failed and been let pass (checkpoint.on_error: continue):
      // then 75 -- "saved, resume me", requeued by the batch script without counting -- would
      // lose every step since the newest checkpoint, at every requeue for as long as the disk
      // stays full. Rank 0 looks for it (committed: the directory is there) and tells the others,
      // over the host communicator: `saved` is host memory, which NCCL's (cuda, 2+ ranks) cannot
      // read.
      double saved = 1;
      if (rank0) {
        const int64_t step = trainer.next_step();
        saved = io::is_directory(checkpoint_path(job.run_dir, step)) ? 1 : 0;
      }
      devices.host_comm->broadcast(&saved, 1, DType::kFloat64, 0)->wait();
      if (saved == 0) {
        if (rank0) {
          const int sig = trainer.stop_signal();
          const std::string by = sig != 0 ? signal_name(sig) : "a signal (seen on another rank)";
          const std::string why = "stopped by " + by + " after step " +
                                  std::to_string(trainer.next_step()) +
                                  ", but its checkpoint could not be saved (above, why)";
          std::printf("ringmaster: %s; a resume goes back to the newest checkpoint that verifies\n",
                      why.c_str());
          std::fflush(stdout);
          append_run_event(job.run_dir, "failed", {{"exit_code", kExitFailure}, {"error", why}});
        }
        return kExitFailure;
      }
      if (rank0) {
        const int sig = trainer.stop_signal();
        append_run_event(job.run_dir, "stopped",
                         {{"step", trainer.next_step()},
                          {"signal", sig != 0 ? signal_name(sig) : "(seen on another rank)"}});
        std::printf(
            "ringmaster: stopped by %s after step %lld; checkpoint saved; run the same "
            "command again to resume\n",
            sig != 0 ? signal_name(sig).c_str() : "a signal (first seen on another rank)",
            static_cast<long long>(trainer.next_step()));
        std::fflush(stdout);
      }
      return kExitStopped;
    }
    // Rank 0 writes weights.bin as the parameters stream past (gathered unit by unit under
    // ZeRO-3; the other ranks take part in the gathers): no rank holds a second copy of the model.
    if (!rank0) {
      trainer.state().stream_params(nullptr);
    } else {
      const std::string weights = run_file(job.run_dir, "weights.bin");
      WeightsFileWriter out(weights, trainer.model().layout().size());
      trainer.state().stream_params(
          [&](const float* data, size_t count) { out.append(data, count); });
      out.commit();
      std::printf("ringmaster: done; weights in %s\n", weights.c_str());
      // Rank 0's peak resident memory over the whole run, the final write included.
      append_run_event(job.run_dir, "finished",
                       {{"step", trainer.next_step()},
                        {"weights", weights},
                        {"peak_rss_mib", std::round(peak_rss_mib() * 10) / 10}});
    }
    comm.barrier();
    return kExitOk;
  } catch (const IoError& e) {
    // One rank's I/O failure -- rank 0's metrics.jsonl or weights.bin on a full disk -- ends the
    // job at once with its cause, as a failed save does (Checkpointing::or_abort): unwinding here
    // would meet the other ranks in the communicator's destructor while they wait in a
    // collective, and end in their timeout (300 s by default) with the cause never printed.
    if (comm.size() > 1) comm.abort(std::string("I/O error: ") + e.what());
    throw;
  } catch (const CheckpointError& e) {
    // Likewise a checkpoint that fails as one rank reads its part (a checksum of its piece).
    if (comm.size() > 1) comm.abort(e.what());
    throw;
  } catch (const InputError& e) {
    // Bad input found while training -- a token id past the vocabulary in the part of the data
    // one rank reads -- is bad input still (exit 2, not retried), said by the rank that found
    // it. The run has started: events.jsonl says it failed (`status`), or it would look alive.
    // Under MPI the others are in a collective already, which this rank would otherwise meet
    // with the wrong buffers as it unwinds ("not in the same allocate() block"), the cause lost.
    // Before the steps, bad input is found by every rank alike (the resume's checks): each
    // leaves with exit 2 (srun reports that; an abort's killed tasks could make it 137, which
    // the batch script would requeue).
    if (training) {
      append_run_event(job.run_dir, "failed",
                       {{"exit_code", kExitBadInput}, {"rank", rank}, {"error", e.what()}});
      if (comm.size() > 1) comm.abort(e.what(), kExitBadInput);
    }
    throw;
  } catch (const std::exception& e) {
    // Any other error of one rank's (out of memory building the trainer, a failed kernel, a
    // directory that cannot be listed) ends the job at once with its cause, a failure a restart
    // may get past (exit 1): the others wait in a collective this rank will not join -- also
    // before the steps, in the restore's or the allocations' -- and would otherwise meet its
    // unwinding in the communicator's destructor and end only at their timeout, the cause
    // unsaid. (Only bad input, above, is left to every rank alike before the steps.)
    if (comm.size() > 1) comm.abort(e.what());
    throw;
  }
}

// A rank checks its job as `run` does before it launches (worker/job_preparation.h), before
// anything is written: a worker started without `ringmaster run` (srun or mpirun in a batch
// script of one's own, `ringmaster worker`) is checked all the same. Under `run` and `submit`
// this repeats their checks on the host the ranks really got (memory: by the first rank of each
// host, for the ranks that share it).
int run_alone(const RankArgs& args) {
  return report_errors([&] {
    JobPlacement where;
    where.ranks = args.nproc;
    where.names_host = true;
    where.verifies_initial_weights = true;
    where.fresh = args.fresh;
    where.from_given = !args.from.empty();
    CheckedJob checked = check_job(args.job, args.sets, where);
    const JobConfig& job = checked.job;
    const StartKind start = prepare(job, args);
    return run_time(
        [&] { return train(job, checked.data, nullptr, checked.device, "", start, args.from); });
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
  CheckedJob checked;
  int status = report_errors([&] {
    JobPlacement where;
    where.ranks = mpi.world();
    where.local_rank = mpi.local_rank();
    where.ranks_here = mpi.local_size();
    where.own_gpus_possible = true;
    where.checks_memory = mpi.local_rank() == 0;
    where.names_host = true;
    where.fresh = args.fresh;
    where.from_given = !args.from.empty();
    checked = check_job(args.job, args.sets, where);
    return kExitOk;
  });
  const JobConfig& job = checked.job;
  TrainingData& data = checked.data;
  DeviceChoice& choice = checked.device;
  // Agree before anything is written or the first collective of training: if any rank failed
  // its checks, every rank leaves now (the failing ones have said why) instead of waiting for it
  // in a collective. The backend is agreed too: under auto, one node without GPUs puts the
  // whole job on the CPU.
  maybe_inject_fault(mpi.rank(), 0);
  int worst = agree_int(status, Agree::kMax, "every rank's checks");
  if (worst != kExitOk) return worst;
  if (mpi.world() > 1) {
    // Every rank must train on the same data (training_data.h: data_identity); each opened its
    // own. Every rank sees the same list and leaves; rank 0 says why.
    const std::vector<std::string> seen = gather_text(data_identity(data), "the ranks' data");
    std::string differ;
    for (size_t r = 1; r < seen.size(); ++r) {
      if (seen[r] != seen[0]) differ += "; rank " + std::to_string(r) + ": " + seen[r];
    }
    if (!differ.empty()) {
      if (mpi.rank() == 0) {
        print_error(
            "the ranks do not see the same data (data.train, data.val: the same files "
            "with the same content must be at those paths on every host): rank 0: " +
            seen[0] + differ);
      }
      return kExitBadInput;
    }
  }
  const int cuda_here = choice.kind == ComputeKind::kCuda ? 1 : 0;
  const int cuda_everywhere = agree_int(cuda_here, Agree::kMin, "the backend");
  if (cuda_here && !cuda_everywhere) {
    choice = DeviceChoice{ComputeKind::kCpu, -1, "auto: some node of the job has no GPU"};
  }
  if (cuda_everywhere && mpi.world() > 1) {
    // Which physical GPU each rank took: two ranks of a node on one GPU (too few GPUs for the
    // ranks, unless each was bound its own) is bad input, found before anything is written.
    // Every rank sees the same list and leaves; rank 0 says why.
    const std::string shared = gpus_shared(
        gather_text(cuda_device_uuid(choice.device), "the ranks' GPUs"), mpi.host_of_rank());
    if (!shared.empty()) {
      if (mpi.rank() == 0) print_error(shared);
      return kExitBadInput;
    }
  }
  int start = kStartNew;
  status = report_errors([&] {
    if (mpi.rank() == 0) start = prepare(job, args);
    return kExitOk;
  });
  worst = agree_int(status, Agree::kMax, "the run directory");
  if (worst != kExitOk) return worst;
  start = broadcast_int(start, 0, "whether the run resumes");
  return report_errors([&] {
    return run_time(
        [&] {
          return train(job, data, &mpi, choice, mpi.describe(), static_cast<StartKind>(start),
                       args.from);
        });
  });
}

}  // namespace

int rank_main(const RankArgs& args) {
  return launched_by_mpi() ? run_with_mpi(args) : run_alone(args);
}

}  // namespace rm

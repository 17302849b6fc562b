// The step watchdog (resilience.step_timeout_s): one thread per rank that ends the process when
// the rank has made no progress for step_timeout_s seconds -- stuck in compute, in I/O, or
// waiting for a peer that is stopped or dead, inside a collective or outside one (rank 0
// waiting for the other ranks' checkpoint shards).
//
// Why, next to parallel.timeout_s: that timeout bounds each collective and must cover the
// slowest legitimate wait (a whole checkpoint written by a peer while this rank waits), so it is
// long; it also never sees a rank stuck outside a collective. The watchdog measures progress
// instead of waiting, so its timeout can be short.
//
// Progress is any of
//   - a phase mark or beat of this rank's step loop (step_progress.h: per phase, and per
//     parameter unit of forward and backward);
//   - checkpoint I/O by this process, on any thread (checkpoint/io_progress.h: per 256 KiB
//     chunk read or written, per phase of a save, per shard rank 0 collects);
//   - one of this rank's collectives advancing (CommActivity::progress: a completion, a phase
//     of the shared-memory engine);
//   - progress of a rank on the same node (Communicator::share_liveness), so that a rank waiting
//     for a peer that is busy but healthy (rank 0 committing a checkpoint, a rank verifying its
//     share of one for a rollback) does not fire, while ranks waiting for a stopped one do. Ranks
//     on other nodes are not seen: across nodes, step_timeout_s must also exceed the longest time
//     one rank works while the others wait for it.
// Waiting is not progress, and neither is time inside one system call: step_timeout_s must
// exceed the longest single phase (one parameter unit's forward or backward, one validation
// batch, one fsync of this rank's checkpoint shard).
//
// A process that was itself stopped or starved (SIGSTOP or Ctrl-Z of the whole job, a suspended
// Slurm job, a swapping machine) starts the clock again when it runs: a poll that comes more
// than max(1 s + one poll, timeout_s / 2) late means the watchdog did not run either.
//
// Firing: once no progress has been seen for timeout_s (measured from the poll that last saw
// some, so never early, and at most one poll late: timeout_s / 20, between 10 and 250 ms), it
// builds one line, e.g.
//   ringmaster: [rank 0/2] watchdog: no progress for 5.0 s (resilience.step_timeout_s) in step
//   12, phase backward, waiting for all_reduce(seq=37, bytes=87936) issued 5.0 s ago (rank 1
//   is behind); aborting the job
// (one line; the step is 1-based as in the logs; checkpoint phases add the checkpoint I/O last
// begun, e.g. "(checkpoint I/O: shard:collect ...)") and hands it to on_fire. The default
// on_fire, for real runs, writes it to stderr, flushes stdout and stderr (without waiting for a
// stdio lock the stuck thread may hold) and ends the process with std::_Exit(kExitFailure): no
// destructors, no MPI call (MPI runs MPI_THREAD_FUNNELED; only the training thread may call
// it). Under mpirun a rank exiting 1 makes mpirun kill the others (srun: --kill-on-bad-exit=1),
// and exit code 1 lets `ringmaster run`'s restarts and the Slurm script's requeue apply.
//
// Threading: the constructor starts the thread (with every signal blocked, so signals go to the
// other threads), the destructor stops and joins it promptly. The StepProgress and the
// Communicator must outlive the Watchdog; the watchdog only reads them (and calls
// Communicator::activity and share_liveness, which any thread may call). Off (timeout 0): no
// thread at all (start() returns nullptr).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/communicator.h"
#include "configs/job_config.h"
#include "observe/step_progress.h"

namespace rm {

struct WatchdogOptions {
  double timeout_s = 0;  // > 0
  double poll_s = 0;     // 0: timeout_s / 20, clamped to [10 ms, 250 ms]
  // Called once, on the watchdog thread, with the line (no newline). Empty: the default above
  // (print, flush, _Exit(kExitFailure)). If it returns, the watchdog stops watching. Tests
  // inject one to observe the line instead of exiting.
  std::function<void(const std::string& line)> on_fire;
  // The rank's second communicator, where its collectives are on two (the cuda backend: NCCL
  // for the gradients, which shares no liveness, and MPI for the host's collectives: the
  // loss, a checkpoint's shards): its progress and its node's liveness count too, and the line
  // names its operation when that is the one waited for. Null (or `comm` itself): one.
  Communicator* host = nullptr;
};

class Watchdog {
 public:
  Watchdog(const StepProgress& steps, Communicator& comm, WatchdogOptions options);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The trainer's one call: a watchdog for job.resilience.step_timeout_s, or nullptr when it
  // is 0 (off).
  static std::unique_ptr<Watchdog> start(const JobConfig& job, const StepProgress& steps,
                                         Communicator& comm, Communicator* host = nullptr);

  // The line it prints after `idle_s` seconds without progress, as of now.
  std::string describe(double idle_s) const;

 private:
  uint64_t own_beats() const;
  uint64_t peer_beats(uint64_t own);
  Communicator* second() const {  // options_.host where it is another communicator
    return options_.host != &comm_ ? options_.host : nullptr;
  }
  void watch();

  const StepProgress& steps_;
  Communicator& comm_;
  WatchdogOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything it reads is set
};

}  // namespace rm

#include "worker/watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "base/exit_codes.h"
#include "checkpoint/io_progress.h"
#include "observe/rank_log.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Flushes a stdio stream unless another thread holds its lock: that thread may be the stuck one.
void flush_if_free(FILE* f) {
  if (::ftrylockfile(f) != 0) return;
  std::fflush(f);  // the lock is recursive: this thread holds it
  ::funlockfile(f);
}

[[noreturn]] void print_and_exit(const std::string& line) {
  flush_if_free(stdout);  // what the rank logged before, ahead of the reason it ends
  flush_if_free(stderr);
  const std::string text = line + "\n";
  // write(2), not stdio: no lock to wait for. A short write is all we can do here.
  if (::write(STDERR_FILENO, text.data(), text.size()) < 0) {
    // nothing to do: the exit code still says the job failed
  }
  finish_rank_log(false);  // so that RUN_DIR/logs/rank-K.log has the line before the job ends
  std::_Exit(kExitFailure);
}

bool is_checkpoint_phase(Phase p) {
  return p == Phase::kCheckpointSave || p == Phase::kCheckpointWait || p == Phase::kCheckpointLoad;
}

}  // namespace

Watchdog::Watchdog(const StepProgress& steps, Communicator& comm, WatchdogOptions options)
    : steps_(steps), comm_(comm), options_(std::move(options)) {
  if (!(options_.timeout_s > 0)) throw std::invalid_argument("Watchdog: timeout_s must be > 0");
  if (options_.poll_s <= 0) options_.poll_s = std::clamp(options_.timeout_s / 20, 0.01, 0.25);
  // The thread inherits the signal mask: block everything while creating it, so that signals
  // (a stop signal, Ctrl-C) are handled by the threads that expect them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { watch(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::unique_ptr<Watchdog> Watchdog::start(const JobConfig& job, const StepProgress& steps,
                                          Communicator& comm, Communicator* host) {
  if (job.resilience.step_timeout_s <= 0) return nullptr;
  WatchdogOptions options;
  options.timeout_s = job.resilience.step_timeout_s;
  options.host = host;
  return std::make_unique<Watchdog>(steps, comm, std::move(options));
}

uint64_t Watchdog::own_beats() const {
  // Each count only grows, so the sum changes exactly when one of them does.
  const Communicator* host = second();
  return steps_.beats() + io_progress_count() + comm_.activity().progress() +
         (host != nullptr ? host->activity().progress() : 0);
}

uint64_t Watchdog::peer_beats(uint64_t own) {
  Communicator* host = second();
  return comm_.share_liveness(own) + (host != nullptr ? host->share_liveness(own) : 0);
}

void Watchdog::watch() {
  const auto poll =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.poll_s));
  // A poll this late means this whole process did not run (SIGSTOP, Ctrl-Z, a suspended Slurm
  // job, a machine swapping): not the rank's fault, so the clock starts again.
  const auto late = std::max(poll + std::chrono::seconds(1),
                             std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(options_.timeout_s / 2)));
  uint64_t own = own_beats();
  uint64_t peers = peer_beats(own);
  auto last_progress = Clock::now(), last_poll = last_progress;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, poll, [this] { return stop_; })) {
    const uint64_t own_now = own_beats();
    const uint64_t peers_now = peer_beats(own_now);
    const auto now = Clock::now();
    const bool suspended = now - last_poll > late;
    last_poll = now;
    if (own_now != own || peers_now != peers || suspended) {
      own = own_now;
      peers = peers_now;
      last_progress = now;
      continue;
    }
    const double idle = seconds(now - last_progress);
    if (idle < options_.timeout_s) continue;
    lock.unlock();
    const std::string line = describe(idle);
    if (options_.on_fire) {
      options_.on_fire(line);
      return;
    }
    print_and_exit(line);
  }
}

std::string Watchdog::describe(double idle_s) const {
  const Phase phase = steps_.phase();
  CommActivity::Snapshot op = comm_.activity().snapshot();
  if (const Communicator* host = second()) {
    // The operation waited for, or else the one in flight, of either communicator.
    const CommActivity::Snapshot h = host->activity().snapshot();
    if ((h.blocked && !op.blocked) || (op.seq == 0 && h.seq != 0)) op = h;
  }
  char head[192];
  std::snprintf(head, sizeof head,
                "ringmaster: [rank %d/%d] watchdog: no progress for %.1f s "
                "(resilience.step_timeout_s) in step %lld, phase %s",
                comm_.rank(), comm_.size(), idle_s, static_cast<long long>(steps_.step()),
                phase_name(phase));
  std::string line = head;
  const char* io = io_activity();
  if (is_checkpoint_phase(phase) && *io != '\0')
    line += std::string(" (checkpoint I/O: ") + io + ")";
  if (op.seq != 0) {
    char what[224];
    std::snprintf(what, sizeof what, "%s(seq=%llu, bytes=%llu) issued %.1f s ago", op.name,
                  static_cast<unsigned long long>(op.seq),
                  static_cast<unsigned long long>(op.bytes), seconds(Clock::now() - op.issued));
    if (op.blocked) {
      line += std::string(", waiting for ") + what;
      if (op.peer >= 0) line += " (rank " + std::to_string(op.peer) + " is behind)";
    } else {
      line += std::string(", not waiting in a collective (") + what + ", in flight)";
    }
  } else {
    line += op.blocked ? ", waiting in a collective" : ", not in a collective";
  }
  return line + "; aborting the job";
}

}  // namespace rm

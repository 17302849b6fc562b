#include "worker/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/io_progress.h"

namespace rm {
namespace {

enum class Kind {
  kNone,
  kStop,
  kKill,
  kIll,
  kSleep,
  kSaveKill,
  kNan,
  kNanWeight,
  kSlowIo,
  kSlowStep,
  kSlowStart,
  kSlowInit,
  kSlowRestore,
  kMemKill,
  kReplStop,
  kReplKill,
  kThrow,
  kDevFail
};

struct Fault {
  Kind kind = Kind::kNone;
  const char* name = "";
  int rank = -1;
  long long at = -1;  // the step (stop, kill, sleep, nan), the phase event (savekill), the
                      // delay in microseconds (slowio) or in milliseconds (slowstep,
                      // slowstart, slowinit, slowrestore)
  long long delay_us = 0;
};

// One fault of the comma-separated list; kind kNone if malformed.
Fault parse_one(const std::string& spec) {
  Fault f;
  char kind[16] = "";
  int rank = -1;
  long long at = -1, delay_us = 0;
  char extra = '\0';
  const int n =
      std::sscanf(spec.c_str(), "%15[a-z]:%d:%lld:%lld%c", kind, &rank, &at, &delay_us, &extra);
  // clang-format off
  static const struct {
    const char* name;
    Kind kind;
  } kinds[] = {{"stop", Kind::kStop},
               {"kill", Kind::kKill},
               {"ill", Kind::kIll},
               {"sleep", Kind::kSleep},
               {"savekill", Kind::kSaveKill},
               {"nan", Kind::kNan},
               {"nanweight", Kind::kNanWeight},
               {"slowio", Kind::kSlowIo},
               {"slowstep", Kind::kSlowStep},
               {"slowstart", Kind::kSlowStart},
               {"slowinit", Kind::kSlowInit},
               {"slowrestore", Kind::kSlowRestore},
               {"memkill", Kind::kMemKill},
               {"replstop", Kind::kReplStop},
               {"replkill", Kind::kReplKill},
               {"throw", Kind::kThrow},
               {"devfail", Kind::kDevFail}};
  // clang-format on
  for (const auto& k : kinds) {
    if (std::strcmp(kind, k.name) == 0) {
      f.kind = k.kind;
      f.name = k.name;
    }
  }
  // Step 0 (start-up) exists for stop, kill, ill and sleep only; devfail is at start-up alone.
  const bool at_startup_ok = f.kind == Kind::kStop || f.kind == Kind::kKill ||
                             f.kind == Kind::kIll || f.kind == Kind::kSleep;
  const bool ok = f.kind != Kind::kNone && rank >= 0 &&
                  (f.kind == Kind::kDevFail ? at == 0 : at >= 1 || (at == 0 && at_startup_ok)) &&
                  (n == 3 || (n == 4 && f.kind == Kind::kSaveKill && delay_us >= 0));
  if (!ok) return Fault{};
  f.rank = rank;
  f.at = at;
  f.delay_us = delay_us;
  return f;
}

// RM_TEST_FAULT's value, as install_fault_injection() was given it.
std::string g_spec;
bool g_installed = false;

std::vector<Fault> parse() {
  std::vector<Fault> faults;
  if (!g_installed) return faults;
  const char* env = g_spec.c_str();
  // Faults strike the attempt they name, the first by default: a run restarted by `ringmaster
  // run`'s supervisor (launcher/supervisor.h) or requeued by Slurm must be able to get past
  // them. One started again by the batch script after its ranks died starting
  // (launcher/slurm_script.cc) gets none of those at 0 (start-up: the one that killed the start
  // must not again), but keeps the later ones: its ranks died before any step or save, so those
  // have not struck (a test whose fault is at step 50 still sees it after Open MPI's occasional
  // death in MPI_Init took the first start).
  long attempt = 0;
  for (const char* count : {"RM_RESTART_COUNT", "SLURM_RESTART_COUNT"}) {
    if (const char* restart = std::getenv(count)) attempt = std::max(attempt, std::atol(restart));
  }
  const char* retry = std::getenv("RM_START_RETRY");
  const bool start_retry = retry != nullptr && std::strcmp(retry, "0") != 0;
  const std::string spec(env);
  for (size_t begin = 0; begin <= spec.size();) {
    const size_t comma = std::min(spec.find(',', begin), spec.size());
    std::string one = spec.substr(begin, comma - begin);
    long strikes_in = 0;
    const size_t at = one.find('@');
    char extra = '\0';
    if (at != std::string::npos &&
        (std::sscanf(one.c_str() + at + 1, "%ld%c", &strikes_in, &extra) != 1 || strikes_in < 0)) {
      one.clear();  // malformed: refused below
    } else if (at != std::string::npos) {
      one.resize(at);
    }
    const Fault f = parse_one(one);
    if (f.kind == Kind::kNone) {
      std::fprintf(stderr, "ringmaster: ignoring malformed RM_TEST_FAULT='%s'\n", env);
      return {};
    }
    if (strikes_in == attempt && !(start_retry && f.at == 0)) faults.push_back(f);
    begin = comma + 1;
  }
  return faults;
}

// The savekill state: written once before the hook is installed, then only read by the hook.
Fault g_savekill;
int g_rank = -1;
std::atomic<long long> g_events{0};  // phase events seen (the hook may run on a save thread)
std::atomic<bool> g_kill_pending{false};

[[noreturn]] void kill_self() {
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();  // SIGKILL cannot be caught; this only waits for it to be delivered
}

void kill_if_pending_at_exit() {
  if (g_kill_pending.load()) kill_self();
}

void on_checkpoint_phase(const char* phase) {
  const long long n = g_events.fetch_add(1) + 1;
  if (n != g_savekill.at) return;
  std::fprintf(stderr,
               "ringmaster: [rank %d] RM_TEST_FAULT: savekill at checkpoint phase event %lld "
               "(%s), SIGKILL after %lld us\n",
               g_rank, n, phase, g_savekill.delay_us);
  std::fflush(stderr);
  if (g_savekill.delay_us == 0) kill_self();
  g_kill_pending.store(true);
  std::thread([delay = g_savekill.delay_us] {
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    kill_self();
  }).detach();
}

// slowio: written once before the hook is installed.
long long g_slowio_us = 0;

void on_io_progress() {
  std::this_thread::sleep_for(std::chrono::microseconds(g_slowio_us));
}

// Parses the environment; for a savekill of this rank, installs the phase hook (and the kill
// at exit that keeps a delayed kill from being outrun by the end of the process); for a slowio
// of this rank, the I/O progress hook.
std::vector<Fault> setup(int rank) {
  std::vector<Fault> faults = parse();
  for (const Fault& f : faults) {
    if (f.kind == Kind::kSaveKill && f.rank == rank && g_rank < 0) {
      g_savekill = f;
      g_rank = rank;
      std::atexit(kill_if_pending_at_exit);
      add_checkpoint_phase_hook(on_checkpoint_phase);
    }
    if (f.kind == Kind::kSlowIo && f.rank == rank && g_slowio_us == 0) {
      g_slowio_us = f.at;
      std::fprintf(stderr,
                   "ringmaster: [rank %d] RM_TEST_FAULT: slowio, %lld us at every checkpoint I/O "
                   "beat\n",
                   rank, f.at);
      std::fflush(stderr);
      set_io_progress_hook(on_io_progress);
    }
  }
  return faults;
}

std::vector<Fault>& faults(int rank) {
  static std::vector<Fault> list = setup(rank);
  return list;
}

void announce(int rank, const Fault& f) {
  std::fprintf(stderr, "ringmaster: [rank %d] RM_TEST_FAULT: %s at step %lld\n", rank, f.name,
               f.at);
  std::fflush(stderr);
}

}  // namespace

void install_fault_injection(const char* spec) {
  g_installed = spec != nullptr;
  g_spec = spec != nullptr ? spec : "";
}

void maybe_inject_fault(int rank, int64_t step) {
  for (const Fault& f : faults(rank)) {
    if (f.kind == Kind::kSlowStep && f.rank == rank) {
      static bool announced = false;
      if (!std::exchange(announced, true)) {
        std::fprintf(stderr, "ringmaster: [rank %d] RM_TEST_FAULT: slowstep, %lld ms at every step\n",
                     rank, f.at);
        std::fflush(stderr);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(f.at));
      continue;
    }
    if (f.kind == Kind::kSlowStart && f.rank == rank && step == 0) {
      std::fprintf(stderr, "ringmaster: [rank %d] RM_TEST_FAULT: slowstart, %lld ms at start-up\n",
                   rank, f.at);
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(f.at));
      continue;
    }
    if (f.at != step || f.rank != rank) continue;
    if (f.kind == Kind::kStop) announce(rank, f), raise(SIGSTOP);
    if (f.kind == Kind::kKill) announce(rank, f), raise(SIGKILL);
    if (f.kind == Kind::kIll) announce(rank, f), ::signal(SIGILL, SIG_DFL), raise(SIGILL);
    // sleep_for sleeps on through signals (sleep(3) would return at a stop notice, which a rank
    // records from its start: base/stop_signal.h).
    if (f.kind == Kind::kSleep)
      announce(rank, f), std::this_thread::sleep_for(std::chrono::hours(1));
    if (f.kind == Kind::kThrow) {
      announce(rank, f);
      throw std::runtime_error("an error of rank " + std::to_string(rank) + "'s at step " +
                               std::to_string(step) + " (RM_TEST_FAULT)");
    }
  }
}

void maybe_fail_compute_start(int rank) {
  for (const Fault& f : faults(rank)) {
    if (f.kind != Kind::kDevFail || f.rank != rank) continue;
    announce(rank, f);
    throw std::runtime_error("rank " + std::to_string(rank) +
                             "'s compute backend failed to start (RM_TEST_FAULT)");
  }
}

void maybe_delay_initial_weights(int rank) {
  for (const Fault& f : faults(rank)) {
    if (f.kind != Kind::kSlowInit || f.rank != rank) continue;
    std::fprintf(stderr,
                 "ringmaster: [rank %d] RM_TEST_FAULT: slowinit, %lld ms before init_from\n", rank,
                 f.at);
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(f.at));
  }
}

void maybe_delay_memory_restore(int rank, int64_t step) {
  static bool slept = false;  // once a process
  if (slept) return;
  for (const Fault& f : faults(rank)) {
    if (f.kind != Kind::kSlowRestore || f.rank != rank) continue;
    std::fprintf(stderr,
                 "ringmaster: [rank %d] RM_TEST_FAULT: slowrestore, %lld ms before restoring step "
                 "%lld from memory\n",
                 rank, f.at, static_cast<long long>(step));
    std::fflush(stderr);
    slept = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(f.at));
  }
}

void maybe_fault_in_memory_save(int rank, int64_t step, bool replica_posted) {
  for (const Fault& f : faults(rank)) {
    if (f.at != step || f.rank != rank) continue;
    if (!replica_posted && f.kind == Kind::kMemKill) {
      announce(rank, f);
      // The save's first chunk beats once it is copied and hashed, before the slot is committed.
      set_io_progress_hook(kill_self);
    }
    if (replica_posted && f.kind == Kind::kReplStop) announce(rank, f), raise(SIGSTOP);
    if (replica_posted && f.kind == Kind::kReplKill) announce(rank, f), raise(SIGKILL);
  }
}

namespace {
bool fires_once(Kind kind, int rank, int64_t step) {
  for (Fault& f : faults(rank)) {
    if (f.kind == kind && f.rank == rank && f.at == step) {
      announce(rank, f);
      f.kind = Kind::kNone;  // once: the step retried after a rollback trains normally
      return true;
    }
  }
  return false;
}
}  // namespace

bool fault_poisons_loss(int rank, int64_t step) {
  return fires_once(Kind::kNan, rank, step);
}

bool fault_poisons_weights(int rank, int64_t step) {
  return fires_once(Kind::kNanWeight, rank, step);
}

}  // namespace rm

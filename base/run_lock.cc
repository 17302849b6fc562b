#include "base/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "base/run_lease.h"
#include "io/atomic_file.h"

namespace rm {
namespace {

std::mutex g_mu;
std::set<std::string> g_locked_dirs;  // canonical run directories this process has locked

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

// "pid P on host H since T[, Slurm job J]": the holder's line of the lock file.
std::string whoami() {
  char when[32] = {};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string me = "pid " + std::to_string(::getpid()) + " on host " + host_name() + " since " + when;
  if (const char* job = std::getenv("SLURM_JOB_ID")) me += ", Slurm job " + std::string(job);
  return me;
}

// The holder's line from the lock file (best effort: it is only for the message).
std::string holder_of(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  text = text.substr(0, text.find('\n'));  // the holder's line (run_lease.h: then its lease)
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text.empty() ? "a process that has not said who it is yet" : text;
}

// The Slurm job named at the end of a holder's line ("..., Slurm job J"), or "".
std::string slurm_job_of(const std::string& holder) {
  const std::string mark = ", Slurm job ";
  const size_t at = holder.rfind(mark);
  return at == std::string::npos ? "" : holder.substr(at + mark.size());
}

// The exception for a lock that stays taken once the wait is over: RunDirStillHeld (a failure
// of this start, retried) when an earlier run of this Slurm job holds it -- `ours`, judged by
// the caller --, else IoError (bad input: another run uses the directory).
[[noreturn]] void still_taken(const std::string& run_dir, const std::string& why,
                              const std::string& way_out, bool ours, double wait_s) {
  if (!ours) throw IoError(run_dir + ": " + why + "; " + way_out);
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.0f", wait_s);
  throw RunDirStillHeld(run_dir + ": " + why + ", still after " + waited +
                        " s: processes of an earlier run of this Slurm job (" +
                        std::getenv("SLURM_JOB_ID") +
                        ") outlived it (a node slow to end them); a failed start, not bad "
                        "input: retried as resilience.max_restarts allows");
}

// Whether the holder's line names this Slurm job: a requeue's or a retried start's own
// earlier run.
bool held_by_this_slurm_job(const std::string& holder) {
  const char* job = std::getenv("SLURM_JOB_ID");
  return job != nullptr && *job != '\0' && slurm_job_of(holder) == job;
}

// Whether `pid` is this process or one of its ancestors (Linux: /proc/PID/stat's 4th field).
bool is_self_or_ancestor(pid_t pid) {
  pid_t p = ::getpid();
  for (int depth = 0; depth < 64 && p > 1; ++depth) {
    if (p == pid) return true;
    std::FILE* f = std::fopen(("/proc/" + std::to_string(p) + "/stat").c_str(), "r");
    if (f == nullptr) return false;
    char line[1024] = {};
    const bool ok = std::fgets(line, sizeof(line), f) != nullptr;
    std::fclose(f);
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the
    // last ')'.
    const char* close = ok ? std::strrchr(line, ')') : nullptr;
    char state = 0;
    int ppid = 0;
    if (close == nullptr || std::sscanf(close + 1, " %c %d", &state, &ppid) != 2) return false;
    p = ppid;
  }
  return false;
}

// RM_RUN_LOCK ("PID HOST DIR") names `dir` and its holder: on this host one of our ancestors
// (sbatch exports the submitting shell's environment, and `submit` holds the lock too); on
// another host -- rank 0 placed by `run --hosts` on a host other than the supervisor's -- a
// holder whose lease in the lock file is held, by that host and pid, now (a holder that exits
// cleanly writes "released"; `submit` does not pass the variable on to sbatch).
bool held_for_us(const std::string& dir) {
  const char* env = std::getenv(kRunLockEnv);
  if (env == nullptr) return false;
  // "PID DIR" (no host), as a supervisor before this format wrote it: a rank restarted from a
  // binary upgraded in place gets its old supervisor's variable. Same host, by ancestry.
  const auto old_format = [&] {
    char* rest = nullptr;
    const long old_pid = std::strtol(env, &rest, 10);
    return old_pid > 0 && rest != nullptr && *rest == ' ' && dir == rest + 1 &&
           is_self_or_ancestor(static_cast<pid_t>(old_pid));
  };
  std::istringstream in(env);
  long pid = 0;
  std::string host, rest;
  if (!(in >> pid >> host) || pid <= 0 || in.get() != ' ') return old_format();
  std::getline(in, rest, '\0');
  if (rest != dir) return old_format();  // or a directory with spaces in the old format
  if (host == host_name()) return is_self_or_ancestor(static_cast<pid_t>(pid));
  const Lease lease = read_lease(dir + "/.lock");
  return lease.state == Lease::State::kHeld && lease.host == host && lease.pid == pid;
}

// Takes flock(fd, LOCK_EX | LOCK_NB) on `path`, retrying every 200 ms until `deadline`. While
// something else holds it, busy() says what ("in use by another run (pid ...)"): said once on
// stderr with how long this waits, and thrown (fd closed) with `way_out` once the deadline has
// passed: as RunDirStillHeld when ours() says an earlier run of this Slurm job holds it, else as
// IoError (still_taken). Other failures throw IoError naming the path (fd closed).
template <typename TimePoint, typename Busy, typename Ours>
void flock_by(int fd, const std::string& path, const std::string& run_dir, TimePoint deadline,
              double wait_s, Busy busy, Ours ours, const std::string& way_out) {
  for (bool said = false; ::flock(fd, LOCK_EX | LOCK_NB) != 0;) {
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      throw IoError(path + ": cannot lock the run directory (does this filesystem support " +
                    "flock?): " + std::strerror(err));
    }
    const std::string why = busy();
    if (std::chrono::steady_clock::now() >= deadline) {
      const bool earlier_self = ours();
      ::close(fd);
      still_taken(run_dir, why, way_out, earlier_self, wait_s);
    }
    if (!said) {
      std::fprintf(stderr, "ringmaster: %s: %s; waiting up to %.0f s for it to end\n",
                   run_dir.c_str(), why.c_str(), wait_s);
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Waits until no process holds a shared lock on `dir`/.ranks.lock (a rank of an earlier run that
// outlived its launcher), until `deadline`; throws IoError naming the directory then, or
// RunDirStillHeld where `taking_over` (a new run, not a restart by the same holder) inside a
// Slurm job.
template <typename TimePoint>
void wait_for_earlier_ranks(const std::string& run_dir, const std::string& dir, TimePoint deadline,
                            double wait_s, bool taking_over) {
  const std::string path = dir + "/.ranks.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(path + ": cannot open the ranks' lock: " + std::strerror(errno));
  flock_by(
      fd, path, run_dir, deadline, wait_s,
      [] {
        return std::string(
            "ranks of an earlier run still run in it (their launcher is gone: "
            "killed?), and save or stop within seconds");
      },
      // The run lock is ours now, so their holder is gone: inside a Slurm job, the leftovers
      // of this job's earlier run (a requeue, a retried start), never a live run.
      [&] { return taking_over && std::getenv("SLURM_JOB_ID") != nullptr; },
      "try again once they have exited (`pgrep -af ringmaster` lists them), or set run_dir to "
      "another directory");
  ::close(fd);  // and the exclusive lock with it: this run's ranks take theirs
}

}  // namespace

void wait_for_ranks_to_leave(const std::string& run_dir, double wait_s) {
  std::error_code ec;
  const std::string dir = std::filesystem::canonical(run_dir, ec).string();
  if (ec) throw IoError(run_dir + ": cannot resolve the run directory: " + ec.message());
  wait_for_earlier_ranks(run_dir, dir,
                         std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s),
                         wait_s, /*taking_over=*/false);
}

namespace {

// How many flock(2) holders the file at `path` has on this host, from /proc/locks (-1: no
// /proc/locks; 0 also where the file is missing).
int flock_holders_here(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  std::ifstream locks("/proc/locks");
  if (!locks) return -1;
  // "1: FLOCK  ADVISORY  READ  4711 08:01:1234567 0 EOF" ("->" before the type for a waiter):
  // the file as major:minor (hex) and inode.
  char file[64];
  std::snprintf(file, sizeof file, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  int holders = 0;
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string id, type, advisory, access, pid, where;
    if (fields >> id >> type >> advisory >> access >> pid >> where && type == "FLOCK" &&
        where == file) {
      ++holders;
    }
  }
  return holders;
}

}  // namespace

int ranks_here_holding(const std::string& run_dir) {
  return flock_holders_here(run_dir + "/.ranks.lock");
}

bool run_lock_held_here(const std::string& run_dir) {
  return flock_holders_here(run_dir + "/.lock") > 0;
}

void hold_rank_lock(const std::string& run_dir) {
  const std::string path = run_dir + "/.ranks.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(path + ": cannot open the ranks' lock: " + std::strerror(errno));
  while (::flock(fd, LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    throw IoError(path + ": cannot lock: " + std::strerror(err));
  }
  // Open for the life of the process: the kernel releases the lock when it exits, however.
}

double run_lock_wait_s() {
  if (std::getenv("SLURM_JOB_ID") == nullptr) return 0.0;
  if (const char* v = std::getenv("RM_RUN_LOCK_WAIT_S")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s >= 0 && s <= 3600) return s;
  }
  return 90.0;
}

void lock_run_dir(const std::string& run_dir, double wait_s) {
  std::error_code ec;
  const std::string dir = std::filesystem::canonical(run_dir, ec).string();
  if (ec) throw IoError(run_dir + ": cannot resolve the run directory: " + ec.message());
  if (held_for_us(dir)) return;  // our supervisor holds it for us
  std::lock_guard<std::mutex> guard(g_mu);
  if (g_locked_dirs.count(dir) != 0) return;

  const std::string path = dir + "/.lock";
  // Not O_CLOEXEC: children (mpirun) share the open file, so the lock outlives a killed
  // supervisor as long as mpirun runs (the ranks, which mpirun gives no descriptor of it, hold
  // their own: hold_rank_lock).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0) throw IoError(path + ": cannot open the run lock: " + std::strerror(errno));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, wait_s));
  flock_by(
      fd, path, run_dir, deadline, wait_s,
      [&] { return "in use by another run (" + holder_of(fd) + ")"; },
      [&] { return held_by_this_slurm_job(holder_of(fd)); },
      "wait for it to finish or stop it, or set run_dir to another directory");
  // flock granted; the ranks of the run that held it last may outlive their launcher.
  try {
    wait_for_earlier_ranks(run_dir, dir, deadline, wait_s, /*taking_over=*/true);
  } catch (...) {
    ::close(fd);
    throw;
  }
  // Where flock does not reach other hosts, the lease does (run_lease.h).
  const double lease_s = run_lock_lease_s();
  for (bool said_lease = false;;) {
    const PreviousHolder previous = check_previous_holder(path, host_name(), lease_s);
    if (!previous.live) {
      if (!previous.message.empty()) {
        std::fprintf(stderr, "ringmaster: %s: %s\n", run_dir.c_str(), previous.message.c_str());
      }
      break;
    }
    const std::string why = "in use by another run on another host (" + previous.holder +
                            "): its lease in " + path + " is being renewed, though this " +
                            "host's flock did not see its lock";
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      still_taken(run_dir, why,
                  "wait for it to finish or stop it, or set run_dir to another directory",
                  held_by_this_slurm_job(previous.holder), wait_s);
    }
    if (!said_lease) {
      std::fprintf(stderr, "ringmaster: %s: %s; waiting up to %.0f s for it to exit\n",
                   run_dir.c_str(), why.c_str(), wait_s);
      said_lease = true;
    }
  }
  hold_lease(fd, whoami(), host_name(), lease_s / 6);
  g_locked_dirs.insert(dir);  // the descriptor stays open for the life of the process
  ::setenv(kRunLockEnv, (std::to_string(::getpid()) + " " + host_name() + " " + dir).c_str(), 1);
}

}  // namespace rm

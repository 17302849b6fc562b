#include "launcher/child_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/elapsed.h"
#include "base/stop_signal.h"
namespace rm {
namespace {

volatile sig_atomic_t g_child_pid = 0;
volatile sig_atomic_t g_forward_as_usr1 = 0;
volatile sig_atomic_t g_signals_seen[NSIG] = {};
volatile sig_atomic_t g_any_signal = 0;
volatile sig_atomic_t g_notice_due = 0;  // a stop is to be passed on as SIGUSR1 (wait_child)
volatile sig_atomic_t g_kill_due = 0;    // a second signal: the whole job is to die (wait_child)
volatile sig_atomic_t g_pending_same = 0;  // kSame: a stop that came with no child, for the next
// When each signal was first seen (CLOCK_MONOTONIC, ns; 0: not yet); written by its own
// signal's handler, before that signal counts as seen.
volatile int64_t g_first_seen_ns[NSIG] = {};

// The same signal again within kStopRepeatWindowNs (base/stop_signal.h) is the same stop, not
// a plea to kill: GNU timeout(1) signals its child and then its own process group, which the
// child is in, microseconds apart (measured: `timeout 5 ringmaster run ...` lost its run to
// "second signal" in 2 of 6 tries, when the two did not merge into one pending signal).

// How long a stop passed on as SIGUSR1 is held for the ranks to start (run_child) when nothing
// says they have: by then srun or mpirun has long started them.
constexpr std::chrono::seconds kNoticeHoldLimit{30};

// Saves and restores errno: write(2) and kill(2) may set it, and the interrupted code may be
// between a failing call and its errno check (run_child's waitpid loop reads errno; so may
// anything else this process does while a signal arrives). Found by ThreadSanitizer ("signal
// handler spoils errno").
class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }
  ErrnoKeeper(const ErrnoKeeper&) = delete;
  ErrnoKeeper& operator=(const ErrnoKeeper&) = delete;

 private:
  const int saved_;
};

void forward_to_child(int sig) {
  const ErrnoKeeper keep_errno;
  if (g_any_signal == 0) g_any_signal = sig;
  // No child (between a supervisor's attempts): counted all the same, and passed on to the next
  // child when it starts (run_child), so that a restart does not train on without the stop.
  const pid_t pid = g_child_pid;
  // Repeated SIGUSR1s are one scheduler notice (base/stop_signal.h), not a plea to kill.
  if (sig == SIGUSR1 && g_signals_seen[sig] > 0) return;
  // write(2) and kill(2) are async-signal-safe; printf is not.
  // (A first-seen time of 0: the first copy's handler, on another thread, has not set it yet.)
  if (g_signals_seen[sig] > 0 &&
      (g_first_seen_ns[sig] == 0 || monotonic_ns() - g_first_seen_ns[sig] < kStopRepeatWindowNs)) {
    static const char msg[] =
        "ringmaster: the same signal again at once (as timeout(1) sends it): one stop; send it "
        "again later to kill the job\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    return;
  }
  if (g_signals_seen[sig] == 0) g_first_seen_ns[sig] = monotonic_ns();
  if (g_signals_seen[sig]++ == 0) {
    static const char msg[] =
        "ringmaster: signal received: passing it on to the job (send it again to kill it)\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    // As SIGUSR1, it is sent by wait_child once the ranks are up (see run_child).
    if (g_forward_as_usr1) {
      g_notice_due = 1;
    } else if (pid > 0) {
      ::kill(pid, sig);
    } else {
      g_pending_same = sig;
    }
  } else {
    static const char msg[] = "ringmaster: second signal: killing the job\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    // wait_child kills it: under mpirun the ranks are in process groups of their own, found from
    // /proc (not here: opendir is not async-signal-safe) before mpirun dies and they go to init.
    g_kill_due = 1;
  }
}

// A process's state letter and parent from /proc/PID/stat ("pid (comm) state ppid ...": comm
// may hold spaces and parentheses; the last ')' ends it). False if it is gone.
bool proc_stat(const std::string& pid, char* state, int* ppid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos &&
         std::sscanf(line.c_str() + close + 1, " %c %d", state, ppid) == 2;
}

// Calls f(pid, state, ppid) for every process in /proc.
template <typename F>
void for_each_process(F f) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char state = 0;
    int ppid = 0;
    if (proc_stat(e->d_name, &state, &ppid)) f(e->d_name, state, ppid);
  }
  ::closedir(proc);
}

// Every process below `root` (from /proc's parent links), parents before their children.
std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for_each_process([&](const char* pid, char, int ppid) {
    children[ppid].push_back(static_cast<pid_t>(std::atoi(pid)));
  });
  std::vector<pid_t> out{root};
  for (size_t i = 0; i < out.size(); ++i) {
    for (pid_t c : children[out[i]]) out.push_back(c);
  }
  out.erase(out.begin());
  return out;
}

// Whether process `pid` has stopped (SIGSTOP: 'T'; 't' under a tracer) or is gone (or dead).
bool stopped_or_gone(pid_t pid) {
  char state = 0;
  int ppid = 0;
  return !proc_stat(std::to_string(pid), &state, &ppid) || state == 'T' || state == 't' ||
         state == 'Z' || state == 'X';
}

}  // namespace

void kill_job(pid_t pid) {
  // Stopped first, then killed. A stopped process cannot fork, so once every process found is
  // seen stopped, a scan finds the whole tree. One scan and then SIGKILL let a child forked in
  // between escape: mpirun starts each rank in a process group of its own, and one it forked
  // just then went on as an orphan, writing in a run directory whose lock had been let go.
  // The wait for each stop is bounded (a process in uninterruptible sleep -- a hung NFS write --
  // stops only once that call returns): past it the kill goes ahead with what was found.
  std::set<pid_t> found{pid};
  std::vector<pid_t> fresh{pid};
  ::kill(-pid, SIGSTOP);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!fresh.empty()) {
    for (pid_t p : fresh) ::kill(p, SIGSTOP);
    for (pid_t p : fresh) {
      while (!stopped_or_gone(p) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    fresh.clear();
    for (pid_t p : descendants(pid)) {
      if (found.insert(p).second) fresh.push_back(p);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  ::kill(-pid, SIGKILL);
  for (pid_t p : found) ::kill(p, SIGKILL);
  for (int i = 0; i < 200; ++i) {  // 2 s at most: SIGKILL takes effect at once
    bool alive = false;
    for (pid_t p : found) {
      char state = 0;
      int ppid = 0;
      alive =
          alive || (proc_stat(std::to_string(p), &state, &ppid) && state != 'Z' && state != 'X');
    }
    if (!alive) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

namespace {

// Whether process `pid` runs the executable `exe` (from /proc).
bool runs(const char* pid, const std::string& exe) {
  char target[4096];
  const ssize_t len =
      ::readlink((std::string("/proc/") + pid + "/exe").c_str(), target, sizeof target - 1);
  return len > 0 && started_from(std::string(target, static_cast<size_t>(len))) == exe;
}

// How many processes below `root` run the executable `exe` (from /proc): this host's ranks,
// under mpirun itself or under a daemon it started here.
int ranks_below(pid_t root, const std::string& exe) {
  int n = 0;
  for (pid_t p : descendants(root)) n += runs(std::to_string(p).c_str(), exe) ? 1 : 0;
  return n;
}

// Waits for `pid` to exit, passing a stop on as SIGUSR1 once the ranks are up (see run_child);
// with linger_limit_s > 0, kills its group once it has outlived a rank by that long
// (child_process.h). Polls: a blocking waitpid would sleep through the notice (SA_RESTART).
int wait_child(pid_t pid, const ChildWatch& watch) {
  const double linger_limit_s = watch.linger_limit_s;
  const std::function<bool()>& ranks_started = watch.ranks_started;
  const std::function<int()>& rank_ended = watch.rank_ended;
  using time_point = std::chrono::steady_clock::time_point;
  using Clock = std::chrono::steady_clock;
  int status = 0;
  const std::string exe = linger_limit_s > 0 ? self_path() : "";
  bool had_ranks = false;
  time_point ranks_gone{};  // this host's ranks all ended
  time_point rank_gone{};   // a rank anywhere said it ended (its marker)
  int rank_that_ended = -1;
  time_point next_marker_look{};
  time_point notice_due{};
  bool notice_sent = false;
  bool killed = false;
  for (;;) {
    if (g_kill_due != 0 && !killed) {
      kill_job(pid);
      killed = true;
    }
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
    const auto now = Clock::now();
    if (g_notice_due != 0 && !notice_sent) {
      const bool up = ranks_started && ranks_started();
      if (!up && notice_due == time_point{}) {
        std::fprintf(stderr,
                     "ringmaster: the ranks are still starting: the stop is passed on once they "
                     "are all up\n");
        std::fflush(stderr);
      }
      if (notice_due == time_point{}) notice_due = now;
      if (up || now - notice_due >= kNoticeHoldLimit) {
        ::kill(pid, SIGUSR1);
        notice_sent = true;
      }
    }
    if (linger_limit_s <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    // Two ways to see that mpirun waits for a host it cannot reach: this host's ranks all ended,
    // or any rank, on any host, said it ended (base/rank_end.h) -- the only sign where this host
    // runs none. The ranks of a job end together, within a second, or mpirun ends the job.
    const int ranks = ranks_below(pid, exe);
    if (ranks > 0) {
      had_ranks = true;
      ranks_gone = {};
    } else if (had_ranks && ranks_gone == time_point{}) {
      ranks_gone = now;
    }
    if (rank_ended && rank_gone == time_point{} && now >= next_marker_look) {
      next_marker_look = now + std::chrono::seconds(1);  // a directory listing: once a second
      rank_that_ended = rank_ended();
      if (rank_that_ended >= 0) rank_gone = now;
    }
    const time_point since = ranks_gone == time_point{}  ? rank_gone
                             : rank_gone == time_point{} ? ranks_gone
                                                         : std::min(ranks_gone, rank_gone);
    if (since != time_point{} && now - since > std::chrono::duration<double>(linger_limit_s)) {
      const std::string who =
          since == ranks_gone ? "this host's ranks" : "rank " + std::to_string(rank_that_ended);
      std::fprintf(stderr,
                   "ringmaster: %s ended %.0f s ago and mpirun has not: it waits for a host it "
                   "cannot reach; killing it\n",
                   who.c_str(), linger_limit_s);
      std::fflush(stderr);
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

std::string started_from(const std::string& exe_link, bool* deleted) {
  static const std::string kDeleted = " (deleted)";
  const bool was =
      exe_link.size() > kDeleted.size() &&
      exe_link.compare(exe_link.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0;
  if (deleted != nullptr) *deleted = was;
  return was ? exe_link.substr(0, exe_link.size() - kDeleted.size()) : exe_link;
}

namespace {
std::string g_invoked;  // remember_invoked_path's: absolute, links not followed
}  // namespace

void remember_invoked_path(const char* argv0) {
  if (argv0 == nullptr || *argv0 == '\0') return;
  const std::string name(argv0);
  std::error_code ec;  // absolute() makes a path absolute as written: links are not followed
  if (name.find('/') != std::string::npos) {
    g_invoked = std::filesystem::absolute(name, ec).string();
    return;
  }
  // Found through PATH, as the shell found it.
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "";
  for (size_t begin = 0; begin <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = dirs.substr(begin, colon - begin);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      g_invoked = std::filesystem::absolute(candidate, ec).string();
      return;
    }
    begin = colon + 1;
  }
}

std::string self_path(bool* replaced) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    throw std::runtime_error(std::string("cannot find own binary: ") + std::strerror(errno));
  bool deleted = false;
  const std::string exe = started_from(std::string(self, static_cast<size_t>(n)), &deleted);
  if (replaced != nullptr) *replaced = deleted;
  // Replaced by removal, nothing at its path now, where the user ran it through a link (an
  // install whose link was moved to a new version, the old one removed): the program the link
  // leads to now, by its resolved path (what its processes' /proc/PID/exe will say).
  if (deleted && ::access(exe.c_str(), X_OK) != 0 && !g_invoked.empty()) {
    char now[4096];
    if (::realpath(g_invoked.c_str(), now) != nullptr && ::access(now, X_OK) == 0) return now;
  }
  return exe;
}

std::string invoked_path() {
  if (!g_invoked.empty() && ::access(g_invoked.c_str(), X_OK) == 0) return g_invoked;
  return self_path();
}

bool stop_signal_seen() {
  return g_any_signal != 0;
}

bool killed_by_second_signal() {
  return g_kill_due != 0;
}

int first_stop_signal() {
  return g_any_signal;
}

int run_child(const std::vector<std::string>& argv, SignalForwarding forwarding,
              const ChildWatch& watch) {
  std::vector<std::string> args = argv;
  std::vector<char*> c;
  for (std::string& a : args) c.push_back(a.data());
  c.push_back(nullptr);
  g_forward_as_usr1 = forwarding == SignalForwarding::kAsUsr1 ? 1 : 0;

  // The signals are blocked across the fork: one arriving before this process knows the
  // child's pid stays pending until it does, and the child restores the defaults before
  // unblocking them and exec'ing.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_to_child;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  // SIGHUP: the terminal or SSH session of `ringmaster run` closed. It killed this process and,
  // through PR_SET_PDEATHSIG, the job, with nothing saved: it is a stop like the others.
  // Not a SIGHUP this process ignores (nohup, or a handler install below kept it so): the run
  // was asked to outlive the terminal.
  static const bool hup_ignored = [] {
    struct sigaction old {};
    return ::sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler == SIG_IGN;
  }();
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGHUP}) {
    if (sig == SIGHUP && hup_ignored) continue;
    ::sigaction(sig, &sa, nullptr);
    sigaddset(&stop_signals, sig);
  }
  ::sigprocmask(SIG_BLOCK, &stop_signals, &previous);
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // In its own process group the child no longer dies with a `kill -9` of this process (or
    // of its group), so it is told to: SIGTERM.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    ::setpgid(0, 0);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::signal(sig, SIG_DFL);
    if (!hup_ignored) ::signal(SIGHUP, SIG_DFL);  // nohup's SIG_IGN goes on to the job
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    ::execvp(c[0], c.data());
    std::fprintf(stderr, "ringmaster: cannot start %s: %s\n", c[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists
  g_child_pid = pid;
  // A stop that came while no child ran (g_notice_due, set then, stays for wait_child).
  if (const int sig = g_pending_same; sig != 0 && !g_forward_as_usr1) ::kill(pid, sig);
  g_pending_same = 0;
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  const int status = wait_child(pid, watch);
  g_child_pid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace rm

// Running the training processes as a child, so that this process can pass signals on to them
// and restart them (launcher/supervisor.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace rm {

enum class SignalForwarding {
  kSame,    // SIGTERM, SIGINT, SIGUSR1 and SIGHUP are passed on as they came
  kAsUsr1,  // ... all as SIGUSR1 (the ranks' "checkpoint and stop", which mpirun forwards
            // untouched; mpirun answers SIGTERM and SIGINT by killing the ranks about a second
            // later, too soon for a checkpoint of any size)
};

// What run_child watches besides the child's exit.
struct ChildWatch {
  // Whether every rank is up (rank 0's "started" event): a stop notice is held until then.
  std::function<bool()> ranks_started;
  // > 0 (mpirun across hosts): how long mpirun may outlive a rank of its job (below).
  double linger_limit_s = 0;
  // The lowest rank, on any host, that has ended (base/rank_end.h), or -1.
  std::function<int()> rank_ended;
};

// Runs argv (argv[0] looked up in PATH) as a child in its own process group and returns its
// exit code (128 + the signal if a signal ended it). Throws if it cannot be started.
//  - Own process group: a Ctrl-C in the terminal reaches only this process, which decides what
//    the child gets (`forwarding`). A second SIGTERM or SIGINT is passed on as SIGKILL to
//    the child's process group: the way out of a stuck job.
//  - If this process dies (even by SIGKILL), the child gets SIGTERM (PR_SET_PDEATHSIG).
//  - A stop passed on as SIGUSR1 (kAsUsr1) is held until watch.ranks_started() says that every
//    rank is up, or 30 s at most: mpirun drops a signal that comes before it has started the
//    ranks, and one it passes on while it forks a rank kills that rank before its first
//    instruction (seen: "exited on signal 10"). A rank acts on a stop only after a step anyway,
//    so holding it costs nothing: either way the ranks stop after their first step, or the first
//    few.
//  - watch.linger_limit_s > 0 (mpirun across hosts): once the processes below the child that run
//    this binary (the ranks on this host, under mpirun or a daemon) have all exited, or
//    watch.rank_ended() names a rank that has (any host's: the only sign where this host runs
//    none), the child gets that long to exit too, then its group is killed (SIGKILL) and
//    run_child returns 128 + 9. After a rank aborts the job, mpirun waits for every remote
//    daemon to acknowledge; one behind a cut link never does, and mpirun would wait for ever.
//    The ranks of a job otherwise end within a second of each other.
// One child at a time; the handlers stay installed afterwards (stop_signal_seen() reads them).
int run_child(const std::vector<std::string>& argv, SignalForwarding forwarding,
              const ChildWatch& watch = {});

// Kills process `pid` (a group leader: run_child's child) and everything below it at once, with
// SIGKILL: its process group, and every descendant found from /proc's parent links, in whatever
// group or session it put itself (mpirun's ranks), also one forked as the kill comes (each is
// stopped first, and the tree scanned again until no new one appears). Returns once none of
// them runs (zombies count as gone), or after about 4 s at most. Does not reap `pid`.
// run_child calls it on a second stop signal; exposed for its test.
void kill_job(pid_t pid);

// True once SIGTERM, SIGINT, SIGUSR1 or SIGHUP has reached this process during or after a
// run_child().
bool stop_signal_seen();
// The first of them, or 0.
int first_stop_signal();
// True once a second SIGTERM or SIGINT has had run_child kill its child's job.
bool killed_by_second_signal();

// This program's own path (/proc/self/exe): the path it was started from, also once the file
// there has been replaced (ringmaster upgraded in place during a long run, for which the kernel
// reports "PATH (deleted)"), so that a restart runs the program now at that path rather than
// fail to find one. Where the file is gone and nothing is at its path, but the program was run
// through a link (remember_invoked_path) that leads to a program now -- an install whose link
// was moved to a new version, the old one removed -- that program's resolved path. *replaced,
// when given, says whether the file it was started from was replaced or removed.
std::string self_path(bool* replaced = nullptr);

// Records the path this program was run by (argv[0]; looked up in PATH where it names no
// directory), for self_path. Call once, first thing in main.
void remember_invoked_path(const char* argv0);

// That path, absolute, links not followed -- what a job that runs later (a Slurm batch script,
// each of its requeues) should run, so that it finds the install the link leads to then, not a
// version removed since -- or self_path() where none was recorded or nothing runs there now.
std::string invoked_path();

// A /proc/PID/exe link's text without the kernel's " (deleted)" suffix (*deleted says whether it
// had one): the path that process was started from.
std::string started_from(const std::string& exe_link, bool* deleted = nullptr);

}  // namespace rm

// self_path() and started_from() (launcher/child_process.h): the path a process was started
// from, also once the file there has been replaced -- checked on a real process whose program
// is replaced under it, as an in-place upgrade of ringmaster during a long run would do.
// run_child(): a stop that comes between two children reaches the next one.
// kill_job(): a real process tree that keeps forking children into sessions of their own, as
// mpirun does with ranks, is gone to the last child.
#include "launcher/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"

namespace rm {
namespace {

namespace fs = std::filesystem;

TEST(StartedFrom, TakesTheKernelsDeletedSuffixOffAndNothingElse) {
  bool deleted = true;
  EXPECT_EQ(started_from("/opt/rm/bin/ringmaster", &deleted), "/opt/rm/bin/ringmaster");
  EXPECT_FALSE(deleted);
  EXPECT_EQ(started_from("/opt/rm/bin/ringmaster (deleted)", &deleted), "/opt/rm/bin/ringmaster");
  EXPECT_TRUE(deleted);
  EXPECT_EQ(started_from("/a/ringmaster (deleted) (deleted)", &deleted), "/a/ringmaster (deleted)");
  EXPECT_EQ(started_from(" (deleted)", &deleted), " (deleted)");  // no path before it
  EXPECT_FALSE(deleted);
  EXPECT_EQ(started_from("/a/b (deleted"), "/a/b (deleted");
}

TEST(StartedFrom, FindsThePathOfAProcessWhoseProgramWasReplaced) {
  char tmpl[] = "/tmp/rm-self-path-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl, prog = dir / "prog";
  fs::copy_file("/bin/sleep", prog);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // argv[0] "sleep": a multi-call binary (busybox, uutils) picks its program by that name.
    ::execl(prog.c_str(), "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct Reap {  // the child ends with the test, whichever assertion ends it
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  } reap{pid};
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  // Until the child has exec'd, its link names this test's program.
  std::error_code ec;
  for (int i = 0; i < 500 && fs::read_symlink(link, ec) != prog; ++i) ::usleep(10000);
  bool deleted = true;
  EXPECT_EQ(started_from(fs::read_symlink(link).string(), &deleted), prog.string());
  EXPECT_FALSE(deleted);
  // An upgrade: a new file renamed over the old one, which lives on only for the running process.
  fs::copy_file("/bin/sleep", dir / "prog.new");
  fs::rename(dir / "prog.new", prog);
  const std::string now = fs::read_symlink(link).string();
  EXPECT_NE(now, prog.string());  // the kernel's "PATH (deleted)"
  EXPECT_EQ(started_from(now, &deleted), prog.string()) << now;
  EXPECT_TRUE(deleted);
  fs::remove_all(dir);
}

TEST(SelfPath, IsThisTestsOwnProgram) {
  bool replaced = true;
  const std::string self = self_path(&replaced);
  EXPECT_FALSE(replaced);
  EXPECT_TRUE(fs::equivalent(self, "/proc/self/exe")) << self;
}

// Whether `pid` runs (a zombie does not) the program `sleep`: a pid of this test's children
// that the system gave to another process since is not counted (nor killed).
bool runs_sleep(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' &&
         line[close + 2] != 'X' && line.find(" (sleep) ") != std::string::npos;
}

// A job that forks without pause, each child in a session of its own (out of the job's process
// group: only /proc's parent links lead to it) and writing its pid down once it runs. Killed
// while it forks, no child may survive: one scan of /proc and then SIGKILL let the children
// forked in between go on, orphaned. Several rounds, each a fresh tree.
TEST(KillJob, NoChildForkedAsTheKillComesSurvivesIt) {
  char tmpl[] = "/tmp/rm-kill-job-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string pids = std::string(tmpl) + "/pids";
  std::vector<pid_t> written;
  for (int round = 0; round < 20; ++round) {
    const pid_t job = ::fork();
    ASSERT_GE(job, 0);
    if (job == 0) {
      ::setpgid(0, 0);  // as run_child's child
      const std::string loop =
          "while :; do setsid sh -c 'echo $$ >> " + pids + "; exec sleep 60' & done";
      ::execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(job, job);
    // Until this round's first children have written their pids (three lines or more): the
    // tree is growing.
    const auto lines = [&] {
      std::ifstream in(pids);
      int n = 0;
      for (std::string l; std::getline(in, l);) ++n;
      return n;
    };
    const int before = lines();
    for (int i = 0; i < 500 && lines() < before + 3; ++i) ::usleep(5000);
    kill_job(job);
    int status = 0;
    ASSERT_EQ(::waitpid(job, &status, 0), job);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  // A child that escaped has written its pid by now (it runs on).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::ifstream in(pids);
  for (pid_t p; in >> p;) written.push_back(p);
  EXPECT_GE(written.size(), 60u);  // three a round at least
  int survivors = 0;
  for (pid_t p : written) {
    if (runs_sleep(p)) {
      ++survivors;
      ::kill(p, SIGKILL);
    }
  }
  EXPECT_EQ(survivors, 0) << "of " << written.size() << " children";
  fs::remove_all(tmpl);
}

// A stop that comes while no child runs -- a supervisor between two attempts, after its check
// for one and before the next fork -- reaches the next child once it is up (before: only noted,
// so the restart trained on without it, and a scheduler's kill after its grace time lost every
// step since the last checkpoint).
TEST(RunChild, AStopBetweenTwoChildrenReachesTheNextOne) {
  TempDir dir;
  // The first child installs the forwarding handlers, as a supervisor's first attempt does.
  ASSERT_EQ(run_child({"true"}, SignalForwarding::kAsUsr1, {[] { return true; }, 0, {}}), 0);
  ASSERT_EQ(::raise(SIGTERM), 0);  // handled: no child to pass it to now
  const std::string up = dir.file("up");
  const auto t0 = std::chrono::steady_clock::now();
  const int code = run_child({"sh", "-c", "trap 'exit 42' USR1; touch " + up + "; sleep 30 & wait"},
                             SignalForwarding::kAsUsr1,
                             {[&] { return ::access(up.c_str(), F_OK) == 0; }, 0, {}});
  EXPECT_EQ(code, 42) << "the child was not told of the stop";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
}

}  // namespace
}  // namespace rm

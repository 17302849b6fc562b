// Stopping on a signal (checkpoint.on_signal), through the real binary and real signals: the
// run saves a checkpoint of the step it was in, exits with 75, and the same command resumes it
// to the weights of an uninterrupted run, bit for bit, with each step in metrics.jsonl once.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::logged_steps;
using test::Child;
using test::run_cli;
using test::wait_exit;
using test::wait_for_steps;

// The run to be signalled: rank 0 sleeps 25 ms a step (RM_TEST_FAULT slowstep), so that its
// 400 steps take 10 s at least and the signal, sent once 30 are logged, lands mid-run however
// late a loaded machine schedules this test's thread. Sleeping changes no bits; the resumed run
// is not slowed (a plain run_cli).
Child spawn(const std::string& args, const TempDir& dir) {
  return test::spawn_cli(args, dir.path(), "bg", "RM_TEST_FAULT=slowstep:0:25");
}

constexpr int kStopped = 75;  // base/exit_codes.h: kExitStopped

std::string job_file(const TempDir& dir, bool on_signal) {
  return dir.write("job.yaml", R"(name: sig
run_dir: )" + dir.file("straight") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 400, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 100}
checkpoint: {every: 1000, keep: 2, on_signal: )" + (on_signal ? "true" : "false") + R"(}
parallel: {threads_per_rank: 1, timeout_s: 20}
)");
}

// The pids of a process's children (from /proc).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

// The ranks of a `run --nproc N` child (supervisor -> mpirun -> ranks), once all N exist.
std::vector<pid_t> ranks_of(const Child& child, size_t nproc) {
  for (int i = 0; i < 3000; ++i) {
    const auto mpirun = children_of(child.pid);
    if (mpirun.size() == 1) {
      const auto ranks = children_of(mpirun[0]);
      if (ranks.size() == nproc) return ranks;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

struct Case {
  const char* name;
  int nproc;
  int signal;
  bool one_rank_only;  // signal one rank directly (as a node's own shutdown would) not the launcher
  // Sent this many times, 20 ms apart: one stop delivered again (mpirun passing on a SIGTERM
  // `pkill` also sent each rank; PR_SET_PDEATHSIG firing once per thread of a dying launcher).
  int times = 1;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class StopSignal : public ::testing::TestWithParam<Case> {};

TEST_P(StopSignal, SavesStopsAndResumesExactly) {
  const Case& c = GetParam();
  TempDir dir;
  const std::string job = job_file(dir, true);
  const std::string np = " --nproc " + std::to_string(c.nproc);
  ASSERT_EQ(run_cli("run " + job + np, dir.path()).exit_code, 0);

  const std::string run = dir.file("stopped");
  const std::string args = "run " + job + np + " --set run_dir=" + run;
  const Child child = spawn(args, dir);
  ASSERT_TRUE(wait_for_steps(run + "/metrics.jsonl", 30)) << test::slurp(child.err);
  // While it trains, `status` sees its ranks hold the directory, and gives a time of arrival.
  const auto training = run_cli("status " + run, dir.path());
  EXPECT_NE(training.out.find("state       training (" + std::to_string(c.nproc) + " rank"),
            std::string::npos)
      << training.out;
  EXPECT_NE(training.out.find("eta "), std::string::npos) << training.out;
  pid_t target = child.pid;
  if (c.one_rank_only) {
    // ringmaster (supervisor) -> mpirun -> ranks; signal the last rank found.
    const auto ranks = ranks_of(child, c.nproc);
    ASSERT_EQ(ranks.size(), static_cast<size_t>(c.nproc));
    target = ranks.back();
  }
  for (int i = 0; i < c.times; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(::kill(target, c.signal), 0);
  }
  const int code = wait_exit(child);
  const std::string out = test::slurp(child.out), err = test::slurp(child.err);
  ASSERT_EQ(code, kStopped) << out << err;
  EXPECT_NE(out.find("checkpoint saved; run the same command again to resume"),
            std::string::npos) << out;
  EXPECT_FALSE(fs::exists(run + "/weights.bin"));
  // The ranks were told with SIGUSR1 and name it; `run` says what it was sent.
  if (!c.one_rank_only && c.signal != SIGUSR1) {
    EXPECT_NE(out.find("ringmaster: the stop was " +
                       std::string(c.signal == SIGTERM  ? "SIGTERM"
                                   : c.signal == SIGINT ? "SIGINT"
                                                        : "SIGHUP") +
                       ", sent to ringmaster run"),
              std::string::npos)
        << out;
  }

  // The checkpoint is of the step the run stopped after, and verifies.
  const std::vector<int> steps = logged_steps(run + "/metrics.jsonl");
  ASSERT_FALSE(steps.empty());
  const int stopped_at = steps.back();
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", stopped_at));
  EXPECT_LT(stopped_at, 400);
  char name[32];
  std::snprintf(name, sizeof name, "/checkpoints/step_%08d", stopped_at);
  const auto verify = run_cli("ckpt verify " + run + name, dir.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.err << verify.out;
  // events.jsonl says which signal stopped it, and after which step. The launcher passes
  // SIGTERM and SIGINT on as SIGUSR1; a rank that was not signalled itself says so.
  const std::string events = test::slurp(run + "/events.jsonl");
  const std::string step = "\"step\":" + std::to_string(stopped_at);
  const std::string signal = R"re("signal":"(SIG[A-Z0-9]+|\(seen on another rank\))",)re";
  EXPECT_TRUE(std::regex_search(events, std::regex(R"(\{"event":"stop_signal",)" + signal + step)))
      << events;
  EXPECT_TRUE(std::regex_search(events, std::regex(R"(\{"event":"stopped",)" + signal + step)))
      << events;

  // `status` says it stopped, and gives no time of arrival for a run that is not training
  // (before: no state at all, and an eta for the steps left).
  const auto status = run_cli("status " + run, dir.path());
  EXPECT_TRUE(std::regex_search(
      status.out, std::regex("state       stopped by (SIG[A-Z0-9]+|a signal \\(seen on another "
                             "rank\\)), 20[0-9-]+T")))
      << status.out;
  EXPECT_EQ(status.out.find("eta "), std::string::npos) << status.out;

  const auto resumed = run_cli(args, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_NE(resumed.out.find(std::string("resuming from ") + run + name), std::string::npos)
      << resumed.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")))
      << "stopped and resumed run differs from the uninterrupted one";
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 400));
}

INSTANTIATE_TEST_SUITE_P(
    Signals, StopSignal,
    ::testing::Values(Case{"sigterm_one_rank", 1, SIGTERM, false},
                      Case{"sigint_one_rank", 1, SIGINT, false},
                      Case{"sigterm_to_launcher_of_two_ranks", 2, SIGTERM, false},
                      // The terminal or SSH session of `run` closing (before: the launcher died
                      // of it, and the ranks with it, nothing saved).
                      Case{"sighup_to_launcher_of_two_ranks", 2, SIGHUP, false},
                      Case{"sigusr1_to_one_of_two_ranks", 2, SIGUSR1, true},
                      // Before: the copy took SIGTERM's default action (exit 1, nothing saved).
                      Case{"sigterm_twice_at_once_to_one_of_two_ranks", 2, SIGTERM, true, 2}),
    [](const auto& info) { return std::string(info.param.name); });

// The ranks of a run started in the background with rank `slow` sleeping `ms` at start-up, after
// MPI and its checks (RM_TEST_FAULT slowstart), rank 0 also 25 ms a step (as spawn()). The sleep
// is the margin a loaded machine has to deliver the test's signal while the ranks start.
Child spawn_slow_start(const std::string& args, const TempDir& dir, int slow, int ms) {
  return test::spawn_cli(
      args, dir.path(), "bg",
      "RM_TEST_FAULT=slowstep:0:25,slowstart:" + std::to_string(slow) + ":" + std::to_string(ms));
}

// The step of the run's "stopped" event (-1: none).
int stopped_step(const std::string& run) {
  std::smatch m;
  const std::string events = test::slurp(run + "/events.jsonl");
  if (!std::regex_search(events, m, std::regex(R"(\{"event":"stopped",[^}]*"step":([0-9]+))"))) {
    return -1;
  }
  return std::stoi(m[1]);
}

// A notice that reaches the ranks while they start -- here both, while rank 1 is still starting
// and rank 0 waits for it, both past MPI_Init -- is kept from the rank's first instruction, and
// stops the run after its first step (before: SIGUSR1's default action ended the rank). The
// resumed run ends with the weights of one never stopped.
TEST(StopNoticeWhileStarting, RanksKeepItAndStopAfterTheFirstStep) {
  TempDir dir;
  const std::string job = job_file(dir, true);
  ASSERT_EQ(run_cli("run " + job + " --nproc 2", dir.path()).exit_code, 0);
  const std::string run = dir.file("stopped");
  const std::string args = "run " + job + " --nproc 2 --set run_dir=" + run;
  const Child child = spawn_slow_start(args, dir, 1, 5000);
  ASSERT_TRUE(test::wait_for_text(child.err, "RM_TEST_FAULT: slowstart")) << test::slurp(child.err);
  const std::vector<pid_t> ranks = ranks_of(child, 2);
  ASSERT_EQ(ranks.size(), 2u);
  for (pid_t rank : ranks) ASSERT_EQ(::kill(rank, SIGUSR1), 0);
  const int code = wait_exit(child);
  ASSERT_EQ(code, kStopped) << test::slurp(child.out) << test::slurp(child.err);
  EXPECT_EQ(stopped_step(run), 1) << test::slurp(run + "/events.jsonl");
  EXPECT_EQ(logged_steps(run + "/metrics.jsonl"), std::vector<int>{1});
  const auto verify = run_cli("ckpt verify " + run + "/checkpoints/step_00000001", dir.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.err << verify.out;

  const auto resumed = run_cli(args, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")))
      << "stopped and resumed run differs from the uninterrupted one";
}

// Ctrl-C (SIGTERM alike) to `ringmaster run` the moment it has started mpirun, before any rank
// exists: the launcher holds the notice until the ranks are up (child_process.h) instead of
// passing it to an mpirun that would drop it (the run trained on to the end) or die of it.
TEST(StopNoticeWhileStarting, LauncherHoldsItUntilTheRanksAreUp) {
  TempDir dir;
  const std::string job = job_file(dir, true);
  const std::string run = dir.file("stopped");
  const Child child =
      spawn_slow_start("run " + job + " --nproc 2 --set run_dir=" + run, dir, 0, 3000);
  bool mpirun_started = false;
  for (int i = 0; i < 30000 && !mpirun_started; ++i) {
    mpirun_started = !children_of(child.pid).empty();
    if (!mpirun_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(mpirun_started) << test::slurp(child.err);
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  const int code = wait_exit(child);
  ASSERT_EQ(code, kStopped) << test::slurp(child.out) << test::slurp(child.err);
  EXPECT_NE(test::slurp(child.err).find("the ranks are still starting: the stop is passed on once "
                                        "they are all up"),
            std::string::npos)
      << test::slurp(child.err);
  const int step = stopped_step(run);
  EXPECT_GE(step, 1) << test::slurp(run + "/events.jsonl");
  EXPECT_LT(step, 400);
  char name[32];
  std::snprintf(name, sizeof name, "/checkpoints/step_%08d", step);
  const auto verify = run_cli("ckpt verify " + run + name, dir.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.err << verify.out;
}

// GNU timeout(1) sends its signal to `ringmaster run` and then to its own process group, which
// `run` is in: two SIGTERMs microseconds apart, which merge into one pending signal only
// sometimes. The second, seen within a second of the first, is the same stop: the run saves and
// exits 75 (before: "second signal: killing the job", and everything since the last checkpoint
// lost). The same signal a second later still kills. Rank 0's checkpoint I/O is slowed (0.5 s a
// beat, RM_TEST_FAULT slowio) so that the save is still under way when the later one comes; the
// second of the pair is sent once the launcher has said it has the first, so that the two cannot
// merge into one here.
TEST(StopSignalTwice, TheSameSignalAtOnceIsOneStopAndLaterKills) {
  TempDir dir;
  const std::string job = job_file(dir, true);
  for (const bool later_kill : {false, true}) {
    SCOPED_TRACE(later_kill ? "then again a second later" : "twice at once");
    const std::string run = dir.file(later_kill ? "killed" : "stopped");
    const Child child = test::spawn_cli("run " + job + " --set run_dir=" + run, dir.path(),
                                        later_kill ? "killed" : "stopped",
                                        "RM_TEST_FAULT=slowstep:0:25,slowio:0:500000");
    ASSERT_TRUE(wait_for_steps(run + "/metrics.jsonl", 30)) << test::slurp(child.err);
    ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
    ASSERT_TRUE(test::wait_for_text(child.err, "signal received")) << test::slurp(child.err);
    ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
    ASSERT_TRUE(test::wait_for_text(child.err, "the same signal again at once"))
        << test::slurp(child.err);
    if (later_kill) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));
      ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
    }
    const int code = wait_exit(child);
    const std::string err = test::slurp(child.err);
    if (later_kill) {
      EXPECT_NE(err.find("second signal: killing the job"), std::string::npos) << err;
      EXPECT_NE(code, kStopped) << err;
      EXPECT_NE(code, 0) << err;
      continue;
    }
    ASSERT_EQ(code, kStopped) << test::slurp(child.out) << err;
    EXPECT_EQ(err.find("second signal"), std::string::npos) << err;
    const int step = stopped_step(run);
    ASSERT_GE(step, 30) << test::slurp(run + "/events.jsonl");
    char name[32];
    std::snprintf(name, sizeof name, "/checkpoints/step_%08d", step);
    const auto verify = run_cli("ckpt verify " + run + name, dir.path());
    EXPECT_EQ(verify.exit_code, 0) << verify.err << verify.out;
  }
}

// The second signal kills the whole job before `run` returns: under mpirun the ranks too, which
// sit in process groups of their own (before: `run` returned 137 with both ranks alive, still
// writing metrics and a checkpoint into a run directory whose lock it had let go). `run` says it
// killed the job, and writes a "stopped" event.
TEST(StopSignalTwice, TheSecondKillsTheRanksBeforeRunReturns) {
  TempDir dir;
  const std::string job = job_file(dir, true);
  const std::string run = dir.file("killed");
  const Child child = test::spawn_cli("run " + job + " --nproc 2 --set run_dir=" + run, dir.path(),
                                      "bg", "RM_TEST_FAULT=slowstep:0:25,slowio:0:500000");
  ASSERT_TRUE(wait_for_steps(run + "/metrics.jsonl", 30)) << test::slurp(child.err);
  const std::vector<pid_t> ranks = ranks_of(child, 2);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  ASSERT_TRUE(test::wait_for_text(child.err, "signal received")) << test::slurp(child.err);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  const int code = wait_exit(child);
  EXPECT_NE(code, kStopped);
  const std::string err = test::slurp(child.err);
  EXPECT_NE(err.find("second signal: killing the job"), std::string::npos) << err;
  // Said as this launcher's doing, with an event (before: blamed on a signal sent to mpirun or
  // the ranks, and no event: `status` said the run ended without a word).
  EXPECT_NE(err.find("stopped by SIGTERM, sent again before the ranks had saved: the job was "
                     "killed"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("a signal sent to mpirun"), std::string::npos) << err;
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_NE(events.find(R"("event":"stopped")"), std::string::npos) << events;
  EXPECT_NE(events.find(R"("killed":true)"), std::string::npos) << events;
  for (pid_t rank : ranks) {
    std::ifstream stat("/proc/" + std::to_string(rank) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // gone
    const size_t close = line.rfind(')');
    ASSERT_NE(close, std::string::npos);
    EXPECT_TRUE(line[close + 2] == 'Z' || line[close + 2] == 'X')
        << "rank " << rank << " outlived `run`: " << line;
  }
}

// Under nohup (SIGHUP ignored, which exec passes on), a hangup is no stop: the run was asked to
// outlive its terminal, and trains to the end (before the check, the new SIGHUP handler replaced
// the ignore and the run stopped, exit 75).
TEST(StopSignalNohup, AnIgnoredHangupIsNoStop) {
  TempDir dir;
  const std::string job = job_file(dir, true);
  const Child child = test::spawn_cli("run " + job + " --nproc 2", dir.path(), "bg",
                                      "trap '' HUP; RM_TEST_FAULT=slowstep:0:25");
  ASSERT_TRUE(wait_for_steps(dir.file("straight/metrics.jsonl"), 30)) << test::slurp(child.err);
  ASSERT_EQ(::kill(child.pid, SIGHUP), 0);
  EXPECT_EQ(wait_exit(child), 0) << test::slurp(child.err);
  EXPECT_TRUE(fs::exists(dir.file("straight/weights.bin")));
}

// checkpoint.on_signal: false keeps the default action: the signal kills the run, which saves
// nothing (the last periodic checkpoint is all there is).
TEST(StopSignalOff, SignalKillsWithoutSaving) {
  TempDir dir;
  const std::string job = job_file(dir, false);
  const Child child = spawn("run " + job, dir);
  ASSERT_TRUE(wait_for_steps(dir.file("straight/metrics.jsonl"), 30)) << test::slurp(child.err);
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(child), 128 + SIGTERM);
  EXPECT_TRUE(!fs::exists(dir.file("straight/checkpoints")) ||
              fs::is_empty(dir.file("straight/checkpoints")));
}

// ...also for a SIGUSR1 that came while the ranks started, which they kept until the job said
// what it does: it ends the rank then, as it would have when it came.
TEST(StopSignalOff, NoticeWhileStartingStillKills) {
  TempDir dir;
  const std::string job = job_file(dir, false);
  const Child child = spawn_slow_start("run " + job + " --nproc 2", dir, 1, 5000);
  ASSERT_TRUE(test::wait_for_text(child.err, "RM_TEST_FAULT: slowstart")) << test::slurp(child.err);
  const std::vector<pid_t> ranks = ranks_of(child, 2);
  ASSERT_EQ(ranks.size(), 2u);
  for (pid_t rank : ranks) ASSERT_EQ(::kill(rank, SIGUSR1), 0);
  const int code = wait_exit(child);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, kStopped);
  EXPECT_FALSE(fs::exists(dir.file("straight/metrics.jsonl")) &&
               !logged_steps(dir.file("straight/metrics.jsonl")).empty());
  EXPECT_TRUE(!fs::exists(dir.file("straight/checkpoints")) ||
              fs::is_empty(dir.file("straight/checkpoints")));
}

}  // namespace
}  // namespace rm

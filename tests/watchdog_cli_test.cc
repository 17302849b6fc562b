// resilience.step_timeout_s through the real binary: a rank stopped with SIGSTOP is caught by
// its peer's watchdog long before parallel.timeout_s, naming the step and the collective, and
// nothing is left behind; a rank stuck outside any collective is caught by its own watchdog and
// the supervisor restarts the job; and a healthy run whose checkpoint saves take several times
// the timeout (slow but alive) is left alone.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::run_cli;

std::string job_file(const TempDir& dir, double step_timeout_s, bool async = false) {
  std::string text = "name: watchdog\nrun_dir: " + dir.file("run") + "\n";
  text += "model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}\n";
  text += "data: {train: data/tinyshakespeare.txt}\n";
  text += "train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}\n";
  text +=
      std::string("checkpoint: {every: 4, keep: 2, async: ") + (async ? "true" : "false") + "}\n";
  text += "parallel: {threads_per_rank: 1, timeout_s: 60}\n";
  text += "resilience: {step_timeout_s: " + std::to_string(step_timeout_s) + "}\n";
  return dir.write("job.yaml", text);
}

struct Timed {
  test::CliResult r;
  double seconds = 0;
};

Timed run_timed(const std::string& args, const TempDir& dir, const std::string& env) {
  const auto t0 = Clock::now();
  Timed t;
  t.r = run_cli(args, dir.path(), env);
  t.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return t;
}

// Processes whose command line mentions `text` (the test's temporary directory).
std::vector<std::string> processes_mentioning(const std::string& text) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(text) != std::string::npos) found.push_back(pid + ": " + cmdline);
  }
  return found;
}

// Waits up to 10 s for every process of the run to be gone; returns those still there.
std::vector<std::string> leftovers(const TempDir& dir) {
  std::vector<std::string> left;
  for (int i = 0; i < 100; ++i) {
    left = processes_mentioning(dir.path());
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return left;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// Rank 1 SIGSTOPs itself at the start of step 5. Rank 0 waits for it in the step's gradient
// all-reduce; its watchdog fires after 3 s without progress -- not parallel.timeout_s's 60 s --
// and mpirun takes the stopped rank down with it.
TEST(WatchdogCli, StoppedRankIsCaughtInACollective) {
  TempDir dir;
  const Timed t =
      run_timed("run " + job_file(dir, 3) + " --nproc 2", dir, "RM_TEST_FAULT=stop:1:5");
  const std::string all = t.r.out + t.r.err;
  EXPECT_EQ(t.r.exit_code, 1) << all;  // kExitFailure: restarts and requeues apply
  EXPECT_LT(t.seconds, 30) << all;     // 3 s + start-up and four steps; far below 60 s
  EXPECT_NE(all.find("RM_TEST_FAULT: stop at step 5"), std::string::npos) << all;
  EXPECT_NE(all.find("ringmaster: [rank 0/2] watchdog: no progress for 3."), std::string::npos)
      << all;
  EXPECT_NE(all.find("(resilience.step_timeout_s) in step 5, phase "), std::string::npos) << all;
  EXPECT_NE(all.find("waiting for all_reduce(seq="), std::string::npos) << all;
  EXPECT_NE(all.find("(rank 1 is behind); aborting the job"), std::string::npos) << all;
  // Not the collective timeout: the watchdog came first.
  EXPECT_EQ(all.find("timed out after"), std::string::npos) << all;
  const std::vector<std::string> left = leftovers(dir);
  EXPECT_TRUE(left.empty()) << "still running:\n" << joined(left);
}

// One rank, no MPI: stuck outside any collective (RM_TEST_FAULT=sleep sleeps an hour at the
// start of step 3). Its own watchdog fires (after 3 s: a shorter timeout could fire on a healthy
// fsync of a loaded CI machine, which beats nothing while it lasts); the supervisor sees exit code
// 1 and restarts the job (faults strike the first attempt only), which then finishes.
TEST(WatchdogCli, StuckRankWithoutMpiIsRestarted) {
  TempDir dir;
  const Timed t = run_timed("run " + job_file(dir, 3) + " --set resilience.max_restarts=1", dir,
                            "RM_TEST_FAULT=sleep:0:3");
  const std::string all = t.r.out + t.r.err;
  EXPECT_EQ(t.r.exit_code, 0) << all;
  EXPECT_LT(t.seconds, 60) << all;
  EXPECT_NE(t.r.err.find("ringmaster: [rank 0/1] watchdog: no progress for 3."), std::string::npos)
      << all;
  EXPECT_NE(t.r.err.find("(resilience.step_timeout_s) in step 3, phase data, not in a "
                         "collective; aborting the job"),
            std::string::npos)
      << all;
  EXPECT_NE(t.r.out.find("the job failed (exit code 1); restart 1 of 1"), std::string::npos) << all;
  EXPECT_TRUE(fs::exists(dir.file("run/weights.bin"))) << all;
  const std::vector<std::string> left = leftovers(dir);
  EXPECT_TRUE(left.empty()) << "still running:\n" << joined(left);
}

class WatchdogCliSlowSaves : public ::testing::TestWithParam<bool> {};  // checkpoint.async

// step_timeout_s 3 and three saves on rank 0 that each take twice that or more, beating every
// 0.5 s (RM_TEST_FAULT=slowio): 2.5 s of slack a beat for the I/O call itself on a loaded machine
// (a single fsync beside the crash and power-cut tests can take over a second).
// Rank 1 waits for rank 0 in collectives meanwhile; it sees rank 0's progress through the node's
// shared memory. Nobody fires.
TEST_P(WatchdogCliSlowSaves, DoNotFireTheWatchdog) {
  const bool async = GetParam();
  TempDir dir;
  const Timed t = run_timed("run " + job_file(dir, 3, async) + " --nproc 2", dir,
                            "RM_TEST_FAULT=slowio:0:500000");
  const std::string all = t.r.out + t.r.err;
  EXPECT_EQ(t.r.exit_code, 0) << all;
  EXPECT_EQ(all.find("watchdog:"), std::string::npos) << all;
  EXPECT_NE(all.find("RM_TEST_FAULT: slowio"), std::string::npos) << all;
  // The saves were slow: at least ~6 s each (a dozen beats of 0.5 s), 3 s being the timeout.
  EXPECT_GT(t.seconds, 12) << all;
  EXPECT_TRUE(fs::exists(dir.file("run/weights.bin"))) << all;
  EXPECT_TRUE(fs::exists(dir.file("run/checkpoints/step_00000012/manifest.json"))) << all;
}

INSTANTIATE_TEST_SUITE_P(Mode, WatchdogCliSlowSaves, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "async" : "sync"; });

}  // namespace
}  // namespace rm

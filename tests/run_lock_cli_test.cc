// One live run per run directory (worker/run_lock.h), through the real binary: a second run on
// the directory of a live one is refused at once, touching nothing; a run killed with SIGKILL
// leaves no stale lock; and inside a Slurm job a run waits for the old holder to go (a requeue
// that starts before the old allocation's processes are gone), then resumes from its
// checkpoint.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// Long enough (3000 steps, a few seconds) that the other process acts while it runs.
std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: lock
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 3000, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1000}
checkpoint: {every: 50, keep: 2}
parallel: {threads_per_rank: 1, timeout_s: 20}
)");
}

void expect_each_step_once(const std::string& metrics, int n) {
  const std::vector<int> steps = test::logged_steps(metrics);
  ASSERT_EQ(static_cast<int>(steps.size()), n) << metrics;
  for (int i = 0; i < n; ++i) ASSERT_EQ(steps[static_cast<size_t>(i)], i + 1) << metrics;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RunLock, SecondRunOnALiveRunDirectoryIsRefused) {
  TempDir dir;
  const std::string job = job_file(dir);
  const test::Child first = test::spawn_cli("run " + job, dir.path());
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 5));
  for (const char* extra : {"", " --fresh", " --nproc 2"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto second = run_cli("run " + job + extra, dir.path());
    EXPECT_LT(seconds_since(t0), 10.0) << extra;
    EXPECT_EQ(second.exit_code, 2) << extra << "\n" << second.err;
    EXPECT_NE(second.err.find(dir.file("run") + ": in use by another run (pid "),
              std::string::npos)
        << second.err;
    EXPECT_NE(second.err.find("set run_dir to another directory"), std::string::npos);
  }
  EXPECT_EQ(test::wait_exit(first), 0) << test::slurp(first.err);
  // The first run was not disturbed: every step once, its checkpoints and weights in place.
  expect_each_step_once(dir.file("run/metrics.jsonl"), 3000);
  EXPECT_TRUE(fs::exists(dir.file("run/weights.bin")));
  EXPECT_TRUE(fs::exists(dir.file("run/checkpoints/step_00003000")));
}

TEST(RunLock, AKilledRunLeavesNoStaleLock) {
  TempDir dir;
  const std::string job = job_file(dir);
  const test::Child first = test::spawn_cli("run " + job, dir.path());
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 60));  // a checkpoint at 50
  // SIGKILL the whole run: the supervisor and the rank it started (its process group).
  ::kill(-first.pid, SIGKILL);
  ::kill(first.pid, SIGKILL);
  test::wait_exit(first);
  // The rank may outlive the supervisor by a moment: the lock is held until it is gone.
  const auto t0 = std::chrono::steady_clock::now();
  test::CliResult again;
  do {
    again = run_cli("run " + job, dir.path());
  } while (again.exit_code == 2 && seconds_since(t0) < 10);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resuming from"), std::string::npos) << again.out;
}

TEST(RunLock, InsideASlurmJobARunWaitsForTheOldHolder) {
  TempDir dir;
  const std::string job = job_file(dir);
  const test::Child old = test::spawn_cli("run " + job, dir.path(), "old");
  ASSERT_TRUE(test::wait_for_steps(dir.file("run/metrics.jsonl"), 5));
  // The requeued job starts while the old one still runs ...
  const test::Child requeued = test::spawn_cli("run " + job, dir.path(), "new", "SLURM_JOB_ID=42");
  const auto t0 = std::chrono::steady_clock::now();
  while (test::slurp(requeued.err).find("waiting up to 90 s") == std::string::npos &&
         seconds_since(t0) < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(test::slurp(requeued.err).find("in use by another run"), std::string::npos)
      << test::slurp(requeued.err);
  // ... and the old one is stopped by its signal (as Slurm's preemption does), saving a
  // checkpoint on the way out; the new one then takes over from it.
  ::kill(old.pid, SIGTERM);
  EXPECT_EQ(test::wait_exit(old), 75) << test::slurp(old.err);
  EXPECT_EQ(test::wait_exit(requeued), 0) << test::slurp(requeued.err);
  EXPECT_NE(test::slurp(requeued.out).find("resuming from"), std::string::npos);
  expect_each_step_once(dir.file("run/metrics.jsonl"), 3000);
}

}  // namespace
}  // namespace rm

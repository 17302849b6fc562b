// Crash safety by really crashing: a forked child saves checkpoints in a loop (3 ranks'
// shards, commit, retention) and is SIGKILLed at seeded random moments: half the trials after a
// random delay (0-150 ms), half right after the child enters a chosen phase of the protocol
// (+0-300 us), so narrow windows such as the rename are hit too. After each kill the parent
// checks that find_resume_checkpoint returns a complete checkpoint whose contents are exactly
// the state saved at its step, never older than the last commit the child saw complete, and
// that no committed directory fails verification. The next child resumes in the same run
// directory, as a restarted job would (cleaning scratch, re-saving steps).
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/retention.h"

namespace rm {
namespace {

constexpr uint64_t kN = 150000;  // floats per buffer: 1.8 MB per checkpoint
constexpr int kWorld = 3;
// RM_CRASH_TRIALS overrides the number of trials (for a longer statistics run).
int trials() {
  const char* env = std::getenv("RM_CRASH_TRIALS");
  return env != nullptr ? std::max(20, std::atoi(env)) : 60;
}

// Where the child is, in memory shared with the parent (written by the child only).
const char* const kPhases[] = {"startup",       "shard:write",      "shard:fsync",
                               "shard:verify",  "shard:descriptor", "commit:manifest",
                               "commit:rename", "commit:fsync",     "commit:done",
                               "retention",     "retention:delete", "idle"};
constexpr int kNumPhases = sizeof(kPhases) / sizeof(kPhases[0]);

struct Shared {
  volatile int phase;
  volatile int64_t saving_step;
  volatile int64_t last_committed;  // commit_checkpoint returned for this step
  volatile int64_t saves;
  volatile int recommitting;  // the step being saved is already committed (exchange on commit)
};
Shared* g_shared = nullptr;

int phase_index(const char* phase) {
  for (int i = 0; i < kNumPhases; ++i) {
    if (std::strcmp(kPhases[i], phase) == 0) return i;
  }
  return 0;
}

void record_phase(const char* phase) {
  g_shared->phase = phase_index(phase);
}

[[noreturn]] void child_main(const std::string& run_dir) {
  try {
    record_phase("startup");
    add_checkpoint_phase_hook(record_phase);
    remove_incomplete_checkpoints(run_dir);  // what rank 0 does at start-up
    const auto resume = find_resume_checkpoint(run_dir);
    int64_t step = resume ? resume->step : 0;
    // Sometimes re-save the step resumed from: the commit then exchanges a committed directory.
    if (!(resume && step % 3 == 2)) ++step;
    for (;; ++step) {
      g_shared->saving_step = step;
      g_shared->recommitting = io::exists(checkpoint_path(run_dir, step)) ? 1 : 0;
      testutil::save_steps_checkpoint(run_dir, step, kWorld, kN);
      g_shared->last_committed = step;
      record_phase("retention");
      apply_retention(run_dir, 2, 5);
      record_phase("idle");
      g_shared->saves = g_shared->saves + 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash-test child failed: %s\n", e.what());
    ::_exit(3);
  }
}

// The whole checkpoint must be the one saved at its step.
void expect_exact(const CheckpointInfo& info) {
  CheckpointReader reader(info.path);
  const Manifest& m = reader.manifest();
  ASSERT_EQ(m.step, info.step);
  ASSERT_EQ(m.state["step"], info.step);
  for (size_t b = 0; b < testutil::buffer_names().size(); ++b) {
    ASSERT_EQ(reader.read_buffer(testutil::buffer_names()[b]),
              testutil::buffer_at(info.step, b, kN))
        << info.path << " " << testutil::buffer_names()[b];
  }
}

TEST(CheckpointCrash, SigkillAtRandomMomentsNeverLosesOrCorrupts) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  g_shared = static_cast<Shared*>(mem);
  g_shared->last_committed = -1;
  g_shared->saves = 0;

  std::mt19937 rng(20240611);  // fixed seed: the same kill schedule on every run
  std::map<std::string, int> landed;
  int resumed = 0, kills_mid_save = 0, kills_in_recommit = 0;
  const int n_trials = trials();
  for (int trial = 0; trial < n_trials; ++trial) {
    g_shared->phase = 0;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) child_main(run_dir);
    if (trial % 2 == 0) {
      // A save here takes ~40-70 ms (one fsync ~4 ms): delays up to 150 ms land kills anywhere
      // in start-up and the first two or three save-commit-retention cycles of each child.
      const int delay_us = std::uniform_int_distribution<int>(0, 150000)(rng);
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    } else {
      // Targeted: wait until the child enters a given phase, then kill within 0-300 us, so
      // even the narrow windows (the rename, the directory fsyncs) are hit.
      const int target = 1 + (trial / 2) % (kNumPhases - 1);
      const int delay_us = std::uniform_int_distribution<int>(0, 300)(rng);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (g_shared->phase != target && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    }
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited by itself (status " << status << ")";
    const std::string phase = kPhases[g_shared->phase];
    ++landed[phase];
    if (phase != "idle" && phase != "startup") ++kills_mid_save;
    if (g_shared->recommitting && phase.rfind("commit:", 0) == 0) ++kills_in_recommit;

    std::vector<std::string> report;
    const auto resume = find_resume_checkpoint(run_dir, &report);
    const int64_t committed = g_shared->last_committed;
    if (committed < 0) {
      // No commit has returned yet in any trial; one may still have landed if a kill came after
      // its rename and before the child recorded it (a window ASan's slowdown widens): then it
      // is a step that was being saved, never anything else.
      if (resume) {
        EXPECT_LE(resume->step, static_cast<int64_t>(g_shared->saving_step)) << "trial " << trial;
      }
      continue;
    }
    ASSERT_TRUE(resume) << "trial " << trial << ": commit of step " << committed
                        << " returned, yet nothing to resume from";
    ++resumed;
    // A commit that returned is durable and retention never deletes the newest good one; a
    // newer step is possible only if the kill landed after its rename.
    EXPECT_GE(resume->step, committed) << "trial " << trial << " killed in " << phase;
    EXPECT_LE(resume->step, static_cast<int64_t>(g_shared->saving_step));
    for (const std::string& line : report) {
      EXPECT_EQ(line.rfind("ignored ", 0), 0u) << "a committed checkpoint failed: " << line;
    }
    expect_exact(*resume);
    for (const CheckpointInfo& c : list_checkpoints(run_dir, VerifyLevel::kStructure)) {
      EXPECT_TRUE(!c.committed || c.verify.ok) << c.verify.error;
    }
  }
  std::string summary;
  for (const auto& [phase, n] : landed) summary += " " + phase + "=" + std::to_string(n);
  std::printf(
      "[crash] %d trials, %d resumed, %d kills mid-save (%d while committing over an "
      "existing step), %lld saves completed; kills landed in:%s\n",
      n_trials, resumed, kills_mid_save, kills_in_recommit, static_cast<long long>(g_shared->saves),
      summary.c_str());
  EXPECT_GE(kills_mid_save, n_trials / 4) << "kills rarely landed inside a save:" << summary;
  ::munmap(mem, sizeof(Shared));
}

}  // namespace
}  // namespace rm

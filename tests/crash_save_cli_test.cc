// SIGKILL of one rank of a 2-rank job at seeded random moments of its checkpoint saves, through
// the real binary (RM_TEST_FAULT=savekill, worker/fault_injection.h). Every trial: the job
// fails; every committed checkpoint left verifies and none that the schedule proves committed
// is lost; running the same command again resumes from the newest one (or starts over if there
// is none) and ends with exactly the weights and the per-step losses of an uninterrupted run.
//
// Replay: the seed and every trial's draw are printed; RM_SAVEKILL_SEED and RM_SAVEKILL_TRIALS
// override them (and RM_SAVEKILL_FIRST skips to a trial).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_reader.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

using test::run_cli;

constexpr int kSteps = 12, kEvery = 2, kKeep = 2;
constexpr int kSaves = kSteps / kEvery;

// A hang is a failure, not a stuck ctest: every run gets two minutes (a run takes ~1 s).
const std::string kGuard = "timeout -k 5 120";

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: crash-save
run_dir: )" + dir.file("straight") +
                                   R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 2, keep: 2, async: true}
parallel: {threads_per_rank: 1, timeout_s: 30}
)");
}

// The checkpoint phase events a rank sees, in order (checkpoint_writer.h, retention.cc): every
// rank writes its shard; rank 0 then commits, and from the (keep+1)-th save on retention
// deletes one old checkpoint. Numbered from 1 across the saves, as savekill counts them.
struct Event {
  int save;  // 1-based; save s is of step s * kEvery
  std::string phase;
};

std::vector<Event> schedule(int rank) {
  std::vector<Event> events;
  for (int s = 1; s <= kSaves; ++s) {
    for (const char* p : {"shard:write", "shard:fsync", "shard:descriptor"})
      events.push_back({s, p});
    if (rank != 0) continue;
    for (const char* p : {"commit:manifest", "commit:rename", "commit:fsync", "commit:done"}) {
      events.push_back({s, p});
    }
    if (s > kKeep) events.push_back({s, "retention:delete"});
  }
  return events;
}

// Saves that must have been committed when `rank` reached event n (1-based) of its schedule.
// Rank 0 commits in order, one save in flight: each "commit:fsync" begins after its rename.
// Rank 1 starting save s has passed the collectives of step s * kEvery, so rank 0 has called
// save() for step (s-1) * kEvery, which first finished the save before it: with synchronous
// saves that commits s-1, with asynchronous ones s-2.
int committed_saves_at_least(int rank, int n, bool async) {
  const std::vector<Event> events = schedule(rank);
  if (rank == 0) {
    int done = 0;
    for (int i = 0; i < n; ++i) done += events[i].phase == "commit:fsync";
    return done;
  }
  return std::max(0, events[n - 1].save - (async ? 2 : 1));
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

struct Committed {
  std::vector<int64_t> steps;  // committed step_N directories, ascending
  int scratch = 0;             // step_N*.tmp directories
  std::string bad;             // the committed ones that do not verify, and why
};

Committed scan(const std::string& run_dir) {
  Committed c;
  for (const CheckpointInfo& info : list_checkpoints(run_dir)) {
    if (!info.committed) {
      ++c.scratch;
      continue;
    }
    c.steps.push_back(info.step);
    if (!info.verify.ok) c.bad += "\n  " + info.path + ": " + info.verify.error;
  }
  return c;
}

TEST(CrashSaveCli, SigkillAnyRankAtRandomMomentsOfASaveAlwaysResumes) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string base = "run " + job + " --nproc 2";
  const auto straight = run_cli(base, dir.path(), kGuard);
  ASSERT_EQ(straight.exit_code, 0) << straight.out << straight.err;
  const std::string want_weights = test::slurp(dir.file("straight/weights.bin"));
  const std::map<int, double> want_losses = test::losses_by_step(dir.file("straight/metrics.jsonl"));
  ASSERT_EQ(want_losses.size(), static_cast<size_t>(kSteps));
  ASSERT_FALSE(want_weights.empty());

  const unsigned seed = static_cast<unsigned>(env_int("RM_SAVEKILL_SEED", 20251122));
  const int trials = env_int("RM_SAVEKILL_TRIALS", 22);
  const int first = env_int("RM_SAVEKILL_FIRST", 0);
  std::printf("savekill: seed %u, %d trials (replay: RM_SAVEKILL_SEED=%u RM_SAVEKILL_FIRST=N)\n",
              seed, trials, seed);
  std::mt19937 rng(seed);
  std::vector<std::pair<int, std::string>> all_pairs, pairs;  // (rank, phase)
  for (int r = 0; r < 2; ++r) {
    for (const Event& e : schedule(r)) {
      const std::pair<int, std::string> p{r, e.phase};
      if (std::find(all_pairs.begin(), all_pairs.end(), p) == all_pairs.end()) {
        all_pairs.push_back(p);
      }
    }
  }
  std::map<std::string, int> drawn;
  int resumed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int trial = 0; trial < trials; ++trial) {
    // Draw: a (rank, phase) pair, cycling through fresh shuffles of all 11 pairs (rank 0's
    // eight phases, rank 1's three; 22 trials draw each pair twice) so that every phase of both
    // ranks comes up, rare ones such as the retention delete included; then which save; then
    // the delay: 0 (the kill as the phase begins) a third of the time, otherwise up to 3 ms
    // into the phase or past it (a save of this job takes a few ms, most of it fsync).
    if (pairs.empty()) {
      pairs = all_pairs;
      std::shuffle(pairs.begin(), pairs.end(), rng);
    }
    const auto [rank, phase] = pairs.back();
    pairs.pop_back();
    const std::vector<Event> events = schedule(rank);
    std::vector<int> candidates;  // 1-based event numbers of that phase
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].phase == phase) candidates.push_back(static_cast<int>(i) + 1);
    }
    const int n = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng)];
    const bool zero_delay = std::uniform_int_distribution<int>(0, 2)(rng) == 0;
    const int delay_us = zero_delay ? 0 : std::uniform_int_distribution<int>(1, 3000)(rng);
    const bool async = trial % 2 == 0;
    if (trial < first) continue;

    const std::string fault = "savekill:" + std::to_string(rank) + ":" + std::to_string(n) + ":" +
                              std::to_string(delay_us);
    const std::string label = "trial " + std::to_string(trial) + " (seed " + std::to_string(seed) +
                              "): RM_TEST_FAULT=" + fault + " = save " +
                              std::to_string(events[n - 1].save) + " " + phase + ", async " +
                              (async ? "true" : "false");
    std::printf("%s\n", label.c_str());
    std::fflush(stdout);
    SCOPED_TRACE(label);

    const std::string run_dir = dir.file("trial_" + std::to_string(trial));
    const std::string cmd = base + " --set run_dir=" + run_dir +
                            " --set checkpoint.async=" + (async ? "true" : "false");
    const auto killed = run_cli(cmd, dir.path(), "RM_TEST_FAULT=" + fault + " " + kGuard);
    ASSERT_NE(killed.exit_code, 0) << "the job was not killed\n" << killed.out << killed.err;
    ASSERT_NE(killed.exit_code, 124) << "hang: killed after 120 s\n" << killed.out << killed.err;
    // The hook saw the phase the schedule above predicts (it prints what it hit).
    const std::string hit =
        "savekill at checkpoint phase event " + std::to_string(n) + " (" + phase + ")";
    ASSERT_NE(killed.err.find(hit), std::string::npos)
        << "expected '" << hit << "': is the schedule of phase events out of date?\n"
        << killed.err;

    const Committed after_kill = scan(run_dir);
    EXPECT_TRUE(after_kill.bad.empty())
        << "committed checkpoints that do not verify:" << after_kill.bad;
    const int64_t newest = after_kill.steps.empty() ? -1 : after_kill.steps.back();
    const int must = committed_saves_at_least(rank, n, async);
    if (must > 0) {
      EXPECT_GE(newest, int64_t{must} * kEvery)
          << "save " << must << " (step " << must * kEvery << ") was committed, yet the newest "
          << "checkpoint left is step " << newest;
    }
    std::string where = "newest committed step " + std::to_string(newest) + " (at least " +
                        std::to_string(must * kEvery) + "), " + std::to_string(after_kill.scratch) +
                        " scratch dir(s)";

    const auto again = run_cli(cmd, dir.path(), kGuard);
    ASSERT_EQ(again.exit_code, 0) << "the rerun failed\n" << again.out << again.err;
    std::smatch m;
    const bool said_resuming =
        std::regex_search(again.out, m, std::regex(R"(resuming from \S+ \(step (\d+)\))"));
    if (newest >= 0) {
      ++resumed;
      ASSERT_TRUE(said_resuming) << again.out;
      EXPECT_EQ(std::stoll(m[1].str()), newest) << "did not resume from the newest checkpoint";
    } else {
      EXPECT_FALSE(said_resuming) << again.out;
    }
    EXPECT_TRUE(test::slurp(run_dir + "/weights.bin") == want_weights)
        << "weights after the rerun differ from the uninterrupted run's";
    const std::map<int, double> got_losses = test::losses_by_step(run_dir + "/metrics.jsonl");
    std::string missing;
    for (const auto& [step, loss] : want_losses) {
      if (got_losses.count(step) == 0) missing += " " + std::to_string(step);
    }
    EXPECT_EQ(got_losses, want_losses)
        << (missing.empty() ? ""
                            : "metrics.jsonl has no line for step(s)" + missing +
                                  " (a checkpoint of that step committed, then the kill, "
                                  "before its metrics line was written?)");
    const Committed after_rerun = scan(run_dir);
    EXPECT_TRUE(after_rerun.bad.empty()) << after_rerun.bad;
    EXPECT_EQ(after_rerun.scratch, 0) << "scratch directories left after a complete run";
    ASSERT_FALSE(after_rerun.steps.empty());
    EXPECT_EQ(after_rerun.steps.back(), kSteps);

    std::printf("  -> %s; rerun %s\n", where.c_str(),
                said_resuming ? ("resumed from step " + m[1].str()).c_str() : "started over");
    ++drawn[phase];
    if (HasFatalFailure()) return;
    std::filesystem::remove_all(run_dir);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("savekill: %d trials in %.1f s, %d resumed from a checkpoint; kills by phase drawn:",
              trials - first, seconds, resumed);
  for (const auto& [phase, count] : drawn) std::printf(" %s=%d", phase.c_str(), count);
  std::printf("\n");
}

}  // namespace
}  // namespace rm

// Crash trials: SIGKILL of one rank of a 2-rank job during its checkpoint saves, through the
// real binary, then the same command again, which must recover. Two ways to kill, alternately:
//   at a call  the fault layer (io/fault_file_system.h, RM_TEST_IO_FAULT at=N) kills the rank
//              just before its N-th I/O call under checkpoints/, or halfway through it if it is
//              a write (action=tear). N is drawn among the calls of one part of a save, as a
//              reference run of the same job lists them, so every part is reached on purpose;
//   at a time  RM_TEST_FAULT=savekill (worker/fault_injection.h) kills the rank from a thread
//              0-3 ms after a checkpoint phase begins, wherever the rank has got to by then.
// Either way the fault layer journals the killed rank's I/O calls and phase notes, and the
// trial reads where the kill landed from its last record (tests/fault_journal.h): "write",
// "fsync", "manifest", "rename", "retention", ... or "between saves". The suite requires
// landings in the write, the fsync, the manifest, the rename and retention.
//
// Every trial: the job fails; every committed checkpoint left verifies; none whose commit
// rename the journal shows made is lost (a process crash keeps the page cache, so made is
// enough; power_cut_cli_test covers what needs fsync); the rerun resumes from the newest (or
// starts over if there is none), leaves no scratch directory, and ends with exactly the weights
// and the per-step losses of an uninterrupted run.
//
// RM_CRASH_TRIALS=N runs N trials (default 22; a soak: 200), RM_CRASH_SEED draws them, and
// RM_CRASH_FIRST=K skips to trial K: the seed and each trial's draw are printed, for replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "io/power_cut.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/fault_journal.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

constexpr int kSteps = 12, kEvery = 2, kKeep = 2;
constexpr int kSaves = kSteps / kEvery;

// A hang is a failure, not a stuck ctest: every run gets two minutes (a run takes ~1 s).
const std::string kGuard = "timeout -k 5 120";

// The parts of a save that every full run of the suite must have seen a kill land in.
const std::vector<std::string> kRequiredParts = {"write", "fsync", "manifest", "rename",
                                                 "retention"};

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

// RM_TEST_IO_FAULT for a run: journal every process's calls under the run directory; count
// those of `rank` under checkpoints/ (and, with `more`, trigger a fault there).
std::string io_fault(const std::string& run_dir, const std::string& journal, int rank,
                     const std::string& more = "") {
  return "RM_TEST_IO_FAULT='scope=" + run_dir + " journal=" + journal + " count_under=" + run_dir +
         "/checkpoints rank=" + std::to_string(rank) + (more.empty() ? "" : " " + more) + "'";
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
    for (const char* p : {"shard:write", "shard:fsync", "shard:verify", "shard:descriptor"})
      events.push_back({s, p});
    if (rank != 0) continue;
    for (const char* p : {"commit:manifest", "commit:rename", "commit:fsync", "commit:done"}) {
      events.push_back({s, p});
    }
    if (s > kKeep) events.push_back({s, "retention:delete"});
  }
  return events;
}

// Saves that must have been committed when `rank` reached phase event n (1-based). Rank 0
// commits in order, one save in flight: each "commit:fsync" begins after its rename. Rank 1
// starting save s has passed the collectives of step s * kEvery, so rank 0 has called save()
// for step (s-1) * kEvery, which first finished the save before it: with synchronous saves
// that commits s-1, with asynchronous ones s-2.
int committed_saves_at_least(int rank, int n, bool async) {
  const std::vector<Event> events = schedule(rank);
  if (rank == 0) {
    int done = 0;
    for (int i = 0; i < n; ++i) done += events[i].phase == "commit:fsync";
    return done;
  }
  return std::max(0, events[n - 1].save - (async ? 2 : 1));
}

// The newest checkpoint whose commit rename (step_N.tmp -> step_N) the journal shows made.
int64_t newest_renamed(const std::string& journal) {
  int64_t newest = -1;
  const std::regex committed(R"(/checkpoints/step_(\d{8})$)");
  for (const std::string& to : io::renames_made(journal)) {
    std::smatch m;
    if (std::regex_search(to, m, committed)) {
      newest = std::max<int64_t>(newest, std::stoll(m[1].str()));
    }
  }
  return newest;
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

std::string base_name(const std::string& path) {
  return path.substr(path.find_last_of('/') + 1);
}

// Makes RUN_DIR/checkpoints/ before a run, as a resumed run finds it: else both ranks' first
// saves race to create it, and the one that wins makes one more call (the fsync of the run
// directory), which would shift a rank's call numbers from one run to the next.
void make_checkpoints_dir(const std::string& run_dir) {
  std::filesystem::create_directories(run_dir + "/checkpoints");
}

// One kill of a trial, as drawn.
struct Kill {
  int rank = 0;
  std::string env;     // RM_TEST_FAULT / RM_TEST_IO_FAULT assignments
  std::string what;    // printed
  std::string part;    // at a call: the part of the save aimed at ("" at a time)
  int64_t call = 0;    // at a call: its number
  std::string hit;     // at a time: what the savekill hook must print
  int must_saves = 0;  // at a time: saves known committed before the kill
};

// The calls of each (rank, part of a save) in a reference run: what "at a call" draws from.
using CallsByPart = std::map<std::pair<int, std::string>, std::vector<test::JournalCall>>;

class CrashTrials {
 public:
  CrashTrials(const TempDir& dir, std::string base, unsigned seed)
      : dir_(dir), base_(std::move(base)), rng_(seed) {}

  // The uninterrupted run, with synchronous and with asynchronous saves: the weights and losses
  // to end with (the same either way), and the calls of every part of a save, rank by rank.
  void reference(bool async) {
    const std::string run_dir = dir_.file(async ? "reference_async" : "reference_sync");
    const std::string journal = run_dir + ".log";
    make_checkpoints_dir(run_dir);
    const auto r = run_cli(base_ + " --set run_dir=" + run_dir +
                               " --set checkpoint.async=" + (async ? "true" : "false"),
                           dir_.path(), io_fault(run_dir, journal, 0) + " " + kGuard);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const std::string weights = test::slurp(run_dir + "/weights.bin");
    const std::map<int, double> losses = test::losses_by_step(run_dir + "/metrics.jsonl");
    ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
    ASSERT_FALSE(weights.empty());
    if (weights_.empty()) {
      weights_ = weights;
      losses_ = losses;
    }
    ASSERT_TRUE(weights == weights_ && losses == losses_) << "sync and async runs differ";
    // Every rank counts its calls (only rank 0 would trigger a fault, and none is asked for).
    const test::FaultJournal j = test::read_fault_journal(journal);
    CallsByPart& calls_by_part = calls_[async];
    for (int rank = 0; rank < 2; ++rank) {
      for (const test::JournalCall& c : j.rank(rank).calls) {
        calls_by_part[{rank, test::save_part(c.phase, rank)}].push_back(c);
      }
    }
    std::string seen;
    for (const auto& [key, calls] : calls_by_part) {
      seen +=
          " " + std::to_string(key.first) + ":" + key.second + "=" + std::to_string(calls.size());
    }
    for (const std::string& part : kRequiredParts) {
      const std::pair<int, std::string> key{0, part};
      ASSERT_FALSE(calls_by_part[key].empty()) << "rank 0 made no I/O call in the save's " << part
                                               << "; calls by rank and part:" << seen;
    }
  }

  // At a call. The first draws aim at the required parts on rank 0, in order; then every
  // (rank, part) with calls, in fresh shuffles.
  Kill at_a_call(const std::string& run_dir, const std::string& journal, bool async) {
    if (call_targets_.empty()) {
      for (const auto& [key, calls] : calls_[false]) call_targets_.push_back(key);
      std::shuffle(call_targets_.begin(), call_targets_.end(), rng_);
      if (first_round_) {
        for (auto it = kRequiredParts.rbegin(); it != kRequiredParts.rend(); ++it) {
          call_targets_.push_back({0, *it});
        }
        first_round_ = false;
      }
    }
    const auto [rank, part] = call_targets_.back();
    call_targets_.pop_back();
    const std::vector<test::JournalCall>& calls = calls_[async][{rank, part}];
    if (calls.empty()) return at_a_call(run_dir, journal, async);  // none in this mode
    const test::JournalCall& c =
        calls[std::uniform_int_distribution<size_t>(0, calls.size() - 1)(rng_)];
    const bool tear = c.kind == "write" && std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
    Kill k;
    k.rank = rank;
    k.part = part;
    k.call = c.n;
    k.env = io_fault(run_dir, journal, rank,
                     "at=" + std::to_string(c.n) + " action=" + (tear ? "tear" : "crash"));
    k.what = std::string(tear ? "tear " : "kill before ") + "call " + std::to_string(c.n) +
             " of rank " + std::to_string(rank) + " (" + part + ": " + c.kind + " " +
             base_name(c.path) + ")";
    return k;
  }

  // At a time: a (rank, phase) pair, cycling through fresh shuffles of all 11 (rank 0's eight
  // phases, rank 1's three), so that rare ones such as the retention delete come up; then which
  // save; then the delay: 0 (the kill as the phase begins) a third of the time, else up to 3 ms
  // into the phase or past it (a save of this job takes a few ms, most of it fsync).
  Kill at_a_time(const std::string& run_dir, const std::string& journal, bool async) {
    if (time_targets_.empty()) {
      for (int r = 0; r < 2; ++r) {
        for (const Event& e : schedule(r)) {
          const std::pair<int, std::string> p{r, e.phase};
          if (std::find(time_targets_.begin(), time_targets_.end(), p) == time_targets_.end()) {
            time_targets_.push_back(p);
          }
        }
      }
      std::shuffle(time_targets_.begin(), time_targets_.end(), rng_);
    }
    const auto [rank, phase] = time_targets_.back();
    time_targets_.pop_back();
    const std::vector<Event> events = schedule(rank);
    std::vector<int> candidates;  // 1-based event numbers of that phase
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].phase == phase) candidates.push_back(static_cast<int>(i) + 1);
    }
    const int n = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_)];
    const bool zero_delay = std::uniform_int_distribution<int>(0, 2)(rng_) == 0;
    const int delay_us = zero_delay ? 0 : std::uniform_int_distribution<int>(1, 3000)(rng_);
    const std::string fault = "savekill:" + std::to_string(rank) + ":" + std::to_string(n) + ":" +
                              std::to_string(delay_us);
    Kill k;
    k.rank = rank;
    k.env = "RM_TEST_FAULT=" + fault + " " + io_fault(run_dir, journal, rank);
    k.what = "RM_TEST_FAULT=" + fault + " (save " + std::to_string(events[n - 1].save) + ", " +
             std::to_string(delay_us) + " us after " + phase + " begins)";
    k.hit = "savekill at checkpoint phase event " + std::to_string(n) + " (" + phase + ")";
    k.must_saves = committed_saves_at_least(rank, n, async);
    return k;
  }

  // One trial: the kill, then the checks, then the rerun and its checks. Returns where the
  // kill landed.
  std::string run(int trial, const Kill& k, bool async, const std::string& run_dir,
                  const std::string& journal) {
    const std::string cmd = base_ + " --set run_dir=" + run_dir +
                            " --set checkpoint.async=" + (async ? "true" : "false");
    make_checkpoints_dir(run_dir);
    const auto killed = run_cli(cmd, dir_.path(), k.env + " " + kGuard);
    EXPECT_NE(killed.exit_code, 0) << "the job was not killed\n" << killed.err << killed.out;
    EXPECT_NE(killed.exit_code, 124) << "hang: killed after 120 s\n" << killed.err << killed.out;
    if (!k.hit.empty()) {
      EXPECT_NE(killed.err.find(k.hit), std::string::npos)
          << "expected '" << k.hit << "': is the schedule of phase events out of date?\n"
          << killed.err;
    }
    if (!std::filesystem::exists(journal)) {
      ADD_FAILURE() << "the run wrote no fault journal: did it start?\n" << killed.err;
    }
    if (testing::Test::HasFailure()) return "";

    // Where it landed: the killed rank's last record.
    const test::FaultJournal journal_read = test::read_fault_journal(journal);
    const test::RankJournal& j = journal_read.rank(k.rank);
    std::string landed = test::save_part(j.last_phase, k.rank);
    std::string detail = landed;
    if (j.call_after_phase && !j.calls.empty()) {
      detail += " (call " + std::to_string(j.calls.back().n) + ": " + j.calls.back().kind + " " +
                base_name(j.calls.back().path) + ")";
    }
    if (!k.part.empty()) {
      // With synchronous saves a rank's calls come in the order of the reference run. With
      // asynchronous ones the next save's preparation (main thread) may interleave with the
      // last one's retention (writer thread), so call N may fall in the other.
      EXPECT_TRUE(j.call_after_phase && !j.calls.empty() && j.calls.back().n == k.call &&
                  (async || landed == k.part))
          << "aimed at call " << k.call << " in the " << k.part << ", landed in " << detail
          << ": do the reference run and this one make different calls?";
      if (landed != k.part) detail += ", aimed at the " + k.part;
    }

    const Committed after_kill = scan(run_dir);
    EXPECT_TRUE(after_kill.bad.empty())
        << "committed checkpoints that do not verify:" << after_kill.bad;
    const int64_t newest = after_kill.steps.empty() ? -1 : after_kill.steps.back();
    const int64_t must = std::max<int64_t>(int64_t{k.must_saves} * kEvery, newest_renamed(journal));
    if (must > 0) {
      EXPECT_GE(newest, must) << "step " << must << " was committed, yet the newest checkpoint "
                              << "left is step " << newest;
    }

    const auto again = run_cli(cmd, dir_.path(), kGuard);
    EXPECT_EQ(again.exit_code, 0) << "the rerun failed\n" << again.err << again.out;
    std::smatch m;
    const bool said_resuming =
        std::regex_search(again.out, m, std::regex(R"(resuming from \S+ \(step (\d+)\))"));
    if (newest >= 0) {
      EXPECT_TRUE(said_resuming) << again.out;
      if (said_resuming) {
        EXPECT_EQ(std::stoll(m[1].str()), newest) << "not the newest";
      }
    } else {
      EXPECT_FALSE(said_resuming) << again.out;
    }
    EXPECT_TRUE(test::slurp(run_dir + "/weights.bin") == weights_)
        << "weights after the rerun differ from the uninterrupted run's";
    EXPECT_TRUE(test::each_step_once(run_dir + "/metrics.jsonl", kSteps));
    const std::map<int, double> got_losses = test::losses_by_step(run_dir + "/metrics.jsonl");
    std::string missing;
    for (const auto& [step, loss] : losses_) {
      if (got_losses.count(step) == 0) missing += " " + std::to_string(step);
    }
    EXPECT_EQ(got_losses, losses_)
        << (missing.empty() ? "" : "no metrics line for step(s)" + missing);
    const Committed after_rerun = scan(run_dir);
    EXPECT_TRUE(after_rerun.bad.empty()) << after_rerun.bad;
    EXPECT_EQ(after_rerun.scratch, 0) << "scratch directories left after a complete run";
    EXPECT_TRUE(!after_rerun.steps.empty() && after_rerun.steps.back() == kSteps);

    resumed_ += said_resuming;
    std::printf(
        "  trial %d landed: %s; newest committed step %lld (at least %lld), %d "
        "scratch dir(s); rerun %s\n",
        trial, detail.c_str(), static_cast<long long>(newest),
        static_cast<long long>(std::max<int64_t>(must, 0)), after_kill.scratch,
        said_resuming ? ("resumed from step " + m[1].str()).c_str() : "started over");
    std::fflush(stdout);
    return landed;
  }

  int resumed() const { return resumed_; }

 private:
  const TempDir& dir_;
  const std::string base_;
  std::mt19937 rng_;
  std::string weights_;
  std::map<int, double> losses_;
  std::map<bool, CallsByPart> calls_;  // by checkpoint.async
  std::vector<std::pair<int, std::string>> call_targets_, time_targets_;
  bool first_round_ = true;
  int resumed_ = 0;
};

TEST(CrashSaveCli, SigkillAnyRankAnywhereInASaveAlwaysResumes) {
  TempDir dir;
  const std::string base = "run " + job_file(dir) + " --nproc 2";
  const unsigned seed = static_cast<unsigned>(env_int("RM_CRASH_SEED", 20251122));
  const int trials = env_int("RM_CRASH_TRIALS", 22);
  const int first = env_int("RM_CRASH_FIRST", 0);
  std::printf("crash trials: seed %u, %d trials (replay: RM_CRASH_SEED=%u RM_CRASH_FIRST=N)\n",
              seed, trials, seed);
  CrashTrials t(dir, base, seed);
  for (const bool async : {false, true}) {
    t.reference(async);
    if (HasFatalFailure()) return;
  }

  std::map<std::string, int> landed;
  const auto t0 = std::chrono::steady_clock::now();
  for (int trial = 0; trial < trials; ++trial) {
    // Kills at a call aim at the required parts first, with synchronous saves, where each
    // lands where it aims (see run()); then saves alternate, two trials each way. Each mode has
    // its own reference run, whose calls the kills at a call are drawn from.
    const bool at_a_call = trial % 2 == 0;
    const bool async = trial % 4 < 2 && trial >= 2 * static_cast<int>(kRequiredParts.size());
    const std::string run_dir = dir.file("trial_" + std::to_string(trial));
    const std::string journal = run_dir + ".log";
    const Kill k =
        at_a_call ? t.at_a_call(run_dir, journal, async) : t.at_a_time(run_dir, journal, async);
    if (trial < first) continue;  // drawn all the same, so that trial K is the same kill
    const std::string label = "trial " + std::to_string(trial) + " (seed " + std::to_string(seed) +
                              "): " + k.what + ", async " + (async ? "true" : "false");
    std::printf("%s\n", label.c_str());
    std::fflush(stdout);
    SCOPED_TRACE(label);
    const std::string where = t.run(trial, k, async, run_dir, journal);
    if (HasFailure()) return;  // the run directory and journal are left for a look
    ++landed[where];
    std::filesystem::remove_all(run_dir);
    std::filesystem::remove(journal);
    std::filesystem::remove_all(io::stash_dir_of(journal));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "crash trials: %d in %.1f s, %d resumed from a checkpoint, the rest started over; "
      "landed in:",
      trials - first, seconds, t.resumed());
  for (const auto& [part, count] : landed) std::printf(" %s=%d", part.c_str(), count);
  std::printf("\n");
  if (first == 0 && trials >= 2 * static_cast<int>(kRequiredParts.size())) {
    for (const std::string& part : kRequiredParts) {
      EXPECT_GE(landed[part], 1) << "no kill landed in the save's " << part;
    }
  }
}

}  // namespace
}  // namespace rm

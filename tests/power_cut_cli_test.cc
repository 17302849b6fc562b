// A power cut at every I/O call of a checkpoint save, through the real binary: the fault layer
// (io/fault_file_system.h, RM_TEST_IO_FAULT) journals every mutating call of every rank under
// the run directory and SIGKILLs the chosen rank just before its N-th call under checkpoints/
// (counted from the first call of the last save, step 4, which also deletes step 2: keep 1).
// The test then replays the journal as a power cut (io/power_cut.h: every directory change not
// covered by a directory fsync is undone, every file cut back to its last fsync) and requires:
//   - every committed checkpoint left verifies, and the newest is step 4 exactly when the
//     journal shows its rename made durable, else step 2 (which was durable before the save);
//   - running the same command again resumes from that checkpoint and ends with the weights
//     and the per-step losses of an uninterrupted run.
// N walks 1, 2, ... until a run completes without reaching N: every call of the save is hit.
// Parameters: 1 and 2 ranks, synchronous and asynchronous saves, the cut on rank 0 (the shard
// and the commit) or rank 1 (its shard only).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "io/posix_io.h"
#include "io/power_cut.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/fault_journal.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

constexpr int kSteps = 4;
const std::string kGuard = "timeout -k 5 120";

struct Case {
  int ranks;
  bool async;
  int cut_rank;
};

std::string name_of(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::to_string(c.ranks) + "ranks_" + (c.async ? "async" : "sync") + "_cut_rank" +
         std::to_string(c.cut_rank);
}

// What an uninterrupted run ends with.
struct Want {
  std::string weights;
  std::map<int, double> losses;
};

// After a cut run died: applies the power cut, checks what is left and
// reruns the command. Returns "" or the first thing that is wrong. *newest_out: the step the
// rerun resumed from (-1: none).
std::string recover_and_check(const std::string& cmd, const std::string& scratch,
                              const std::string& run_dir, const std::string& journal,
                              const Want& want, int64_t* newest_out) {
  const test::FaultJournal rec = test::read_fault_journal(journal);
  const io::PowerCutReport rep = io::apply_power_cut(journal, run_dir);
  const int64_t required = 2 * rec.commits;  // saves every 2 steps
  const bool step4_durable =
      io::rename_made_durable(journal, io::join(run_dir, "checkpoints/step_00000004"));
  int64_t newest = -1;
  for (const CheckpointInfo& info : list_checkpoints(run_dir)) {
    if (!info.committed) continue;
    if (!info.verify.ok) return "committed checkpoint does not verify: " + info.verify.error;
    newest = std::max(newest, info.step);
  }
  *newest_out = newest;
  if (required > 0 && newest < required) {
    return "the save of step " + std::to_string(required) + " had returned, yet the newest "
           "checkpoint after the power cut is " + std::to_string(newest) + " (" + rep.summary() + ")";
  }
  if (step4_durable && newest != 4) return "step 4's rename was durable, yet it is gone";
  const auto again = run_cli(cmd, scratch, kGuard);
  if (again.exit_code != 0) return "the rerun failed: " + again.err;
  std::smatch m;
  const bool resumed =
      std::regex_search(again.out, m, std::regex(R"(resuming from \S+ \(step (\d+)\))"));
  if (resumed != (newest >= 0) || (resumed && std::stoll(m[1].str()) != newest)) {
    return "the rerun did not resume from step " + std::to_string(newest) + ": " + again.out;
  }
  if (test::slurp(run_dir + "/weights.bin") != want.weights) {
    return "the rerun's weights differ from an uninterrupted run's";
  }
  const auto once = test::each_step_once(run_dir + "/metrics.jsonl",
                                         static_cast<int>(want.losses.size()));
  if (!once) return std::string("the rerun's metrics.jsonl: ") + once.message();
  if (test::losses_by_step(run_dir + "/metrics.jsonl") != want.losses) {
    return "the rerun's metrics.jsonl differs from an uninterrupted run's (lines lost?)";
  }
  return "";
}

std::string fault_env(const std::string& run_dir, const std::string& journal,
                      const std::string& extra) {
  return "RM_TEST_IO_FAULT='scope=" + run_dir + " journal=" + journal + " " + extra + "'";
}

void remove_trial(const std::string& run_dir, const std::string& journal) {
  std::filesystem::remove_all(run_dir);
  std::filesystem::remove_all(journal + ".stash");
  std::filesystem::remove(journal);
}

const char kJob[] = R"(name: power-cut
model: {type: gpt, seq_len: 16, layers: 1, heads: 2, width: 16}
data: {train: data/tinyshakespeare.txt}
train: {steps: 4, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 2, keep: 1}
parallel: {threads_per_rank: 1, timeout_s: 30}
)";

class PowerCutCli : public testing::TestWithParam<Case> {};

TEST_P(PowerCutCli, EveryCallOfASaveSurvivesAPowerCutAndResumesExactly) {
  const Case c = GetParam();
  TempDir dir;
  const std::string job = dir.write("job.yaml", kJob);
  const std::string base = "run " + job + " --nproc " + std::to_string(c.ranks) +
                           " --set checkpoint.async=" + (c.async ? "true" : "false");
  const auto straight = run_cli(base + " --set run_dir=" + dir.file("straight"), dir.path(), kGuard);
  ASSERT_EQ(straight.exit_code, 0) << straight.err << straight.out;
  const Want want{test::slurp(dir.file("straight/weights.bin")),
                  test::losses_by_step(dir.file("straight/metrics.jsonl"))};
  ASSERT_EQ(want.losses.size(), static_cast<size_t>(kSteps));

  std::map<std::string, int> hit_kinds;
  int cuts = 0, resumed_from_4 = 0;
  for (int at = 1;; ++at) {
    ASSERT_LT(at, 400) << "the walk does not end";
    const std::string run_dir = dir.file("cut_" + std::to_string(at));
    const std::string journal = dir.file("journal_" + std::to_string(at) + ".log");
    const std::string cmd = base + " --set run_dir=" + run_dir;
    const std::string fault =
        fault_env(run_dir, journal, "count_under=" + run_dir + "/checkpoints start_at=step_00000004 at=" +
                                        std::to_string(at) + " rank=" + std::to_string(c.cut_rank));
    const auto cut = run_cli(cmd, dir.path(), fault + " " + kGuard);
    ASSERT_NE(cut.exit_code, 124) << "hang\n" << cut.err << cut.out;
    const std::vector<test::JournalCall> calls =
        test::read_fault_journal(journal).rank(c.cut_rank).calls;
    if (static_cast<int>(calls.size()) < at) {
      // No call number `at`: the save has fewer calls, and this run must have finished.
      ASSERT_EQ(cut.exit_code, 0) << cut.err << cut.out;
      break;
    }
    ASSERT_NE(cut.exit_code, 0) << cut.err << cut.out;
    const std::string kind = calls[at - 1].kind, path = calls[at - 1].path;
    ++hit_kinds[kind];
    int64_t newest = -1;
    const std::string wrong = recover_and_check(cmd, dir.path(), run_dir, journal, want, &newest);
    ASSERT_EQ(wrong, "") << "power cut before call " << at << " of rank " << c.cut_rank << ": "
                         << kind << " " << path;
    ++cuts;
    resumed_from_4 += newest == 4;
    remove_trial(run_dir, journal);
  }
  std::string kinds;
  for (const auto& [kind, n] : hit_kinds) kinds += " " + kind + "=" + std::to_string(n);
  std::printf("power cut: %d calls of rank %d's save cut, %d resumed from step 4, the rest from "
              "step 2; calls cut by kind:%s\n",
              cuts, c.cut_rank, resumed_from_4, kinds.c_str());
  // The walk covered a real save: the shard's write and fsync, and on rank 0 the commit's
  // renames and retention's deletion of step 2.
  EXPECT_GE(hit_kinds["write"], 1);
  EXPECT_GE(hit_kinds["fsync"], 1);
  if (c.cut_rank == 0) {
    EXPECT_GE(hit_kinds["rename"], 2);
    EXPECT_GE(hit_kinds["unlink"], 1);
    EXPECT_GE(hit_kinds["rmdir"], 1);
    EXPECT_GE(resumed_from_4, 1);
  }
}

// Removing any single fsync or directory fsync of the commit path is caught: the fault layer
// skips the K-th fsync of a whole run (skip_fsync=K, as if the code lacked it), and a power cut
// at each later call is tried until recover_and_check() reports a loss. The table printed says
// which cut catches which fsync. Commit path: every fsync a save makes (phase notes shard:* and
// commit:* in the journal) -- of the shard, the manifest, step_N.tmp/, checkpoints/, the run
// directory (that makes checkpoints/ itself durable) and of metrics.jsonl (its lines must
// outlive no checkpoint). The others (config.yaml, weights.bin, retention's deletions, which
// rename a checkpoint aside before deleting it, so that undoing them only brings back a whole
// checkpoint) are listed, not tried.
TEST(PowerCutCli, RemovingAnyFsyncOfTheCommitPathIsCaught) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", kJob);
  const std::string base = "run " + job + " --nproc 1 --set checkpoint.async=false";
  const std::string ref_dir = dir.file("reference"), ref_journal = dir.file("reference.log");
  const auto ref = run_cli(base + " --set run_dir=" + ref_dir, dir.path(),
                           fault_env(ref_dir, ref_journal, "") + " " + kGuard);
  ASSERT_EQ(ref.exit_code, 0) << ref.err << ref.out;
  const Want want{test::slurp(ref_dir + "/weights.bin"),
                  test::losses_by_step(ref_dir + "/metrics.jsonl")};
  const std::vector<test::JournalCall> all = test::read_fault_journal(ref_journal).rank(0).calls;
  std::vector<std::pair<int64_t, test::JournalCall>> fsyncs;  // (call number, call)
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].kind == "fsync") fsyncs.emplace_back(i + 1, all[i]);
  }
  ASSERT_GE(fsyncs.size(), 8u);
  // A path of a run directory's as the table names it: relative to it, RUN_DIR for itself, a
  // temporary file's process id as PID (it differs from run to run).
  const auto relative_to = [](const std::string& base, const std::string& p) {
    if (p == base) return std::string("RUN_DIR");
    const std::string rel = p.rfind(base + "/", 0) == 0 ? p.substr(base.size() + 1) : p;
    return std::regex_replace(rel, std::regex(R"(\.tmp\.[0-9]+$)"), ".tmp.PID");
  };
  const auto relative = [&](const std::string& p) { return relative_to(ref_dir, p); };

  std::string table, missed;
  for (size_t k = 1; k <= fsyncs.size(); ++k) {
    const test::JournalCall& f = fsyncs[k - 1].second;
    const std::string rel = relative(f.path);
    // The save's own calls (retention's deletions excepted), and the metrics sync before it.
    const bool in_save = f.phase.rfind("shard:", 0) == 0 ||
                         (f.phase.rfind("commit:", 0) == 0 && f.phase != "commit:done");
    const bool commit_path = in_save || rel == "metrics.jsonl";
    std::string caught;
    if (!commit_path) {  // listed only: walking its cuts costs time and proves nothing required
      table += "  fsync " + std::to_string(k) + " (call " + std::to_string(fsyncs[k - 1].first) +
               ", " + rel + ", " + (f.phase.empty() ? "start-up" : f.phase) +
               "): not in the commit path, not tried\n";
      continue;
    }
    for (int64_t at = fsyncs[k - 1].first + 1; at <= static_cast<int64_t>(all.size()) + 1;
         ++at) {
      const std::string run_dir = dir.file("skip"), journal = dir.file("skip.log");
      const std::string cmd = base + " --set run_dir=" + run_dir;
      const auto cut = run_cli(
          cmd, dir.path(),
          fault_env(run_dir, journal, "skip_fsync=" + std::to_string(k) + " at=" + std::to_string(at)) +
              " " + kGuard);
      int64_t newest = -1;
      // A run that ended before call `at` (exit 0) gets its power cut after its last call.
      const bool reached =
          static_cast<int64_t>(test::read_fault_journal(journal).rank(0).calls.size()) >= at;
      const std::string wrong =
          cut.exit_code == 0 || reached
              ? recover_and_check(cmd, dir.path(), run_dir, journal, want, &newest)
              : "the run failed by itself: " + cut.err;
      // A loss counts as catching fsync K only if that fsync was left out in this trial: the
      // journal notes it, right after the call on the reference's file. A loss without it would
      // be a loss with every fsync in place.
      const std::string skipped = test::skipped_fsync_path(journal, static_cast<int64_t>(k));
      remove_trial(run_dir, journal);
      if (!wrong.empty()) {
        EXPECT_EQ(skipped.empty() ? "(no note: nothing was left out)" : relative_to(run_dir, skipped),
                  rel)
            << "fsync " << k << ": the power cut before call " << at
            << " lost data, but the journal does not show this fsync left out: " << wrong;
        caught = "power cut before call " + std::to_string(at) + " (" +
                 relative(all.at(std::min<size_t>(at, all.size()) - 1).path) +
                 "): " + wrong.substr(0, wrong.find('\n'));
        break;
      }
    }
    table += "  fsync " + std::to_string(k) + " (call " + std::to_string(fsyncs[k - 1].first) +
             ", " + rel + ", " + (f.phase.empty() ? "start-up" : f.phase) +
             (commit_path ? "" : ", not commit path") + "): " +
             (caught.empty() ? "NOT CAUGHT" : caught) + "\n";
    if (commit_path && caught.empty()) missed += " " + std::to_string(k) + " (" + rel + ")";
  }
  std::printf("removed fsync -> the power cut that catches it:\n%s", table.c_str());
  EXPECT_EQ(missed, "") << "fsyncs of the commit path whose removal no power cut catches";
}
INSTANTIATE_TEST_SUITE_P(Saves, PowerCutCli,
                         testing::Values(Case{1, false, 0}, Case{1, true, 0}, Case{2, false, 0},
                                         Case{2, true, 0}, Case{2, false, 1}, Case{2, true, 1}),
                         name_of);

}  // namespace
}  // namespace rm

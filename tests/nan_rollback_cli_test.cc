// resilience.on_nan: rollback through the real binary: a step with a non-finite loss rolls the
// run back to its newest verified checkpoint (in memory when checkpoint.memory_every has one),
// the bad step trains on the next batch instead, the skip survives a crash and resume, and a run
// that keeps diverging gives up loudly.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>


#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: nan
run_dir: )" + dir.file("clean") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 3, async: true}
resilience: {on_nan: rollback}
parallel: {threads_per_rank: 1}
)");
}

// step -> loss, after checking that metrics.jsonl holds steps 1..steps once each, in order.
std::map<int, double> losses(const std::string& metrics, int steps) {
  EXPECT_TRUE(test::each_step_once(metrics, steps));
  return test::losses_by_step(metrics);
}

class NanRollback : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = job_file(dir_);
    const auto clean = run_cli("run " + job_, dir_.path());
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    clean_ = losses(dir_.file("clean/metrics.jsonl"), 12);
  }
  std::string run_args(const std::string& name, int nproc = 1) {
    return "run " + job_ + " --nproc " + std::to_string(nproc) + " --set run_dir=" +
           dir_.file(name);
  }
  TempDir dir_;
  std::string job_;
  std::map<int, double> clean_;
};

TEST_F(NanRollback, BadStepRetriesOnTheNextBatch) {
  const auto r = run_cli(run_args("rolled"), dir_.path(), "RM_TEST_FAULT=nan:0:7");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step 7: non-finite loss; rolling back"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resuming from " + dir_.file("rolled/checkpoints/step_00000004")),
            std::string::npos) << r.out;
  const auto rolled = losses(dir_.file("rolled/metrics.jsonl"), 12);
  for (int s = 1; s <= 6; ++s) EXPECT_EQ(rolled.at(s), clean_.at(s)) << "step " << s;
  // Step 7 now trains on the batch that was step 8's: same weights, different data.
  EXPECT_NE(rolled.at(7), clean_.at(7));
  for (const auto& [step, loss] : rolled) EXPECT_TRUE(std::isfinite(loss)) << step;

  const auto inspect =
      run_cli("ckpt inspect " + dir_.file("rolled/checkpoints/step_00000008"), dir_.path());
  EXPECT_NE(inspect.out.find("\"skipped_batches\":[6]"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("\"global_sample_cursor\":72"), std::string::npos) << inspect.out;
}

// What only a rollback mends: NaN in the weights themselves (RM_TEST_FAULT=nanweight), where the
// test above poisons only a loss, which skipping the update alone would survive. The run rolls
// back to step 4, restores its weights, replays 5 and 6 exactly and goes on; one that did not
// restore them would meet NaN at every step after and fail.
TEST_F(NanRollback, NaNWeightsAreMendedByTheRestore) {
  const auto r = run_cli(run_args("weights"), dir_.path(), "RM_TEST_FAULT=nanweight:0:7");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("RM_TEST_FAULT: nanweight"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("step 7: non-finite loss; rolling back"), std::string::npos) << r.out;
  const auto rolled = losses(dir_.file("weights/metrics.jsonl"), 12);
  for (int s = 1; s <= 6; ++s) EXPECT_EQ(rolled.at(s), clean_.at(s)) << "step " << s;
  for (const auto& [step, loss] : rolled) EXPECT_TRUE(std::isfinite(loss)) << step;
  // It ends as the loss-only rollback does: the same weights, bit for bit.
  ASSERT_EQ(run_cli(run_args("loss"), dir_.path(), "RM_TEST_FAULT=nan:0:7").exit_code, 0);
  EXPECT_EQ(test::slurp(dir_.file("weights/weights.bin")),
            test::slurp(dir_.file("loss/weights.bin")));
}

// A run that began with --from another run's checkpoint and has saved none of its own yet rolls
// back to that checkpoint (its own directory holds nothing to go back to): it then trains as a
// run that rolled back to its own copy of the same step.
TEST_F(NanRollback, BeforeItsFirstSaveARunFromACheckpointRollsBackToIt) {
  const std::string start = dir_.file("clean/checkpoints/step_00000004");
  ASSERT_EQ(run_cli(run_args("rolled"), dir_.path(), "RM_TEST_FAULT=nan:0:7").exit_code, 0);
  const auto r = run_cli(run_args("from") + " --from " + start + " --set checkpoint.every=100",
                         dir_.path(), "RM_TEST_FAULT=nan:0:7");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step 7: non-finite loss; rolling back"), std::string::npos) << r.out;
  const std::string resumed = "resuming from " + start + " (step 4)";
  const size_t first = r.out.find(resumed);
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(resumed, first + 1), std::string::npos) << "no second resume: " << r.out;
  const auto rolled = test::losses_by_step(dir_.file("rolled/metrics.jsonl"));
  const auto from = test::losses_by_step(dir_.file("from/metrics.jsonl"));
  for (int s = 5; s <= 12; ++s) EXPECT_EQ(from.at(s), rolled.at(s)) << "step " << s;
}

// The skip is part of the checkpoint: a rolled-back run killed later and resumed ends with the
// weights of the rolled-back run that was not killed.
TEST_F(NanRollback, SkipSurvivesACrashAndResume) {
  ASSERT_EQ(run_cli(run_args("rolled"), dir_.path(), "RM_TEST_FAULT=nan:0:7").exit_code, 0);
  const auto killed = run_cli(run_args("killed") + " --set checkpoint.async=false", dir_.path(),
                              "RM_TEST_FAULT=nan:0:7,kill:0:11");
  EXPECT_NE(killed.exit_code, 0);
  const auto resumed = run_cli(run_args("killed"), dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_NE(resumed.out.find("step_00000008"), std::string::npos) << resumed.out;
  EXPECT_EQ(test::slurp(dir_.file("killed/weights.bin")), test::slurp(dir_.file("rolled/weights.bin")));
  EXPECT_EQ(losses(dir_.file("killed/metrics.jsonl"), 12),
            losses(dir_.file("rolled/metrics.jsonl"), 12));
}

// Two rollbacks of one step from one memory slot: the second retry takes the batch after the
// first retry's, as from disk (the slot's own list of skips replaced the run's, and the second
// retry trained on the first retry's batch again).
TEST_F(NanRollback, TwoRollbacksToOneMemorySlotSkipTwoBatchesAsFromDisk) {
  const auto disk = run_cli(run_args("disk"), dir_.path(), "RM_TEST_FAULT=nan:0:6,nan:0:6");
  ASSERT_EQ(disk.exit_code, 0) << disk.err << disk.out;
  const auto memory = run_cli(run_args("memory") + " --set checkpoint.memory_every=1", dir_.path(),
                              "RM_TEST_FAULT=nan:0:6,nan:0:6");
  ASSERT_EQ(memory.exit_code, 0) << memory.err << memory.out;
  EXPECT_NE(memory.out.find("resuming from memory (step 5"), std::string::npos) << memory.out;
  EXPECT_EQ(losses(dir_.file("memory/metrics.jsonl"), 12),
            losses(dir_.file("disk/metrics.jsonl"), 12));
  EXPECT_EQ(test::slurp(dir_.file("memory/weights.bin")),
            test::slurp(dir_.file("disk/weights.bin")));
  const auto inspect =
      run_cli("ckpt inspect " + dir_.file("memory/checkpoints/step_00000012"), dir_.path());
  EXPECT_NE(inspect.out.find("\"skipped_batches\":[5,5]"), std::string::npos) << inspect.out;
}

// With checkpoint.memory_every: 1 the rollback takes the step before the bad one from memory,
// not step 4 from disk: only the bad step is recomputed, and the run trains on as the disk
// rollback's did. Killed later, the rerun resumes from memory holding the skip.
TEST_F(NanRollback, FromMemoryOnlyTheBadStepIsLostAndTheSkipIsKept) {
  ASSERT_EQ(run_cli(run_args("rolled"), dir_.path(), "RM_TEST_FAULT=nan:0:7").exit_code, 0);
  const std::string memory = " --set checkpoint.memory_every=1 --set checkpoint.async=false";
  const auto killed =
      run_cli(run_args("memory") + memory, dir_.path(), "RM_TEST_FAULT=nan:0:7,kill:0:11");
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_NE(killed.out.find("step 7: non-finite loss; rolling back"), std::string::npos)
      << killed.out;
  EXPECT_NE(killed.out.find("resuming from memory (step 6; disk: step 4)"), std::string::npos)
      << killed.out;
  EXPECT_EQ(killed.out.find("step_00000004 (step 4)"), std::string::npos) << killed.out;

  const auto resumed = run_cli(run_args("memory") + memory, dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_NE(resumed.out.find("resuming from memory (step 10; disk: step 8)"), std::string::npos)
      << resumed.out;
  EXPECT_EQ(test::slurp(dir_.file("memory/weights.bin")),
            test::slurp(dir_.file("rolled/weights.bin")));
  EXPECT_EQ(losses(dir_.file("memory/metrics.jsonl"), 12),
            losses(dir_.file("rolled/metrics.jsonl"), 12));
}

// Every rank rolls back together when one rank's loss is non-finite (the loss is all-reduced).
TEST_F(NanRollback, OneRankOfTwo) {
  ASSERT_EQ(run_cli(run_args("rolled"), dir_.path(), "RM_TEST_FAULT=nan:0:7").exit_code, 0);
  const auto r = run_cli(run_args("two", 2), dir_.path(), "RM_TEST_FAULT=nan:1:7");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("rolling back"), std::string::npos) << r.out;
  const auto one = losses(dir_.file("rolled/metrics.jsonl"), 12);
  const auto two = losses(dir_.file("two/metrics.jsonl"), 12);
  for (int s = 1; s <= 12; ++s) EXPECT_NEAR(two.at(s), one.at(s), 1e-5 * one.at(s)) << s;
}

// A real divergence (a learning rate of 1e30) that every retry repeats: after three rollbacks
// the run stops with exit 1 and says why.
TEST_F(NanRollback, PersistentDivergenceGivesUp) {
  const auto r = run_cli(run_args("diverged") +
                             " --set optimizer.lr=1e30 --set optimizer.warmup_steps=0"
                             " --set checkpoint.every=1 --set optimizer.grad_clip=0",
                         dir_.path());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("again after 3 rollbacks at this step"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rm

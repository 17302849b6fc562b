// `run --from CKPT` through the real binary: the checkpoint is checked before anything is
// written (bad input, exit 2, on one rank or several, at once: not after the collective
// timeout); --fresh never empties the directory that holds it; and a resume from an older
// checkpoint starts a line of its own, whose next plain resume continues it (not the line it
// left), and so does the same --from again (a requeued batch script's). Found by adversarial
// reviews; each case failed before its fix.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;
using testutil::TempDir;

// 12 steps, checkpoints at 4, 8 and 12 (kept: all), in dir/straight unless run_dir is set.
std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", "name: from\nrun_dir: " + dir.file("straight") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 5, async: false}
parallel: {threads_per_rank: 1, timeout_s: 120}
)");
}

// The run in `run` ended as the one never interrupted: each of its 12 steps logged once, and
// its weights (`straight`) bit for bit.
void expect_ended_as_straight(const std::string& run, const std::string& straight) {
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
  EXPECT_EQ(test::slurp(run + "/weights.bin"), straight);
}

// Flips one bit in the middle of the file at `path`: a checkpoint piece that no longer verifies.
// False if the file is empty or missing.
bool flip_a_byte(const std::string& path) {
  std::string bytes = test::slurp(path);
  if (bytes.empty()) return false;
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return true;
}

// `r`, a --from given again, went on with its line from the line's checkpoint of step 8.
void expect_goes_on_at_step_8(const test::CliResult& r) {
  EXPECT_NE(r.out.find("goes on from it already"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step_00000008 (step 8)"), std::string::npos) << r.out;
}

// --fresh with a --from inside the run directory would delete the checkpoint it names (and every
// other) and then fail: refused, nothing removed.
// A finished run resumed --from its own older checkpoint: its weights.bin, the end at step 12,
// goes until the run ends again; the message does not call step 4 that end.
TEST(FromCli, AFinishedRunFromAnOlderCheckpointSaysItsEndIsAnEarlierOne) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const auto r = run_cli("run " + job + " --from " + dir.file("straight/checkpoints/step_00000004"),
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("weights.bin, of the run's earlier end, is removed until it ends again"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("end at step 4"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(dir.file("straight/weights.bin")), straight) << "the same end again";
}

TEST(FromCli, FreshNeverEmptiesTheDirectoryOfItsCheckpoint) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  const auto r =
      run_cli("run " + job + " --fresh --from " + run + "/checkpoints/step_00000004", dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("which --fresh empties first"), std::string::npos) << r.err;
  for (const char* step : {"step_00000004", "step_00000008", "step_00000012"}) {
    EXPECT_TRUE(fs::exists(run + "/checkpoints/" + step + "/manifest.json")) << step;
  }
  EXPECT_TRUE(fs::exists(run + "/weights.bin"));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
}

// A --from that is not a checkpoint of this model: exit 2 at once, naming it, and nothing
// written in a new run directory -- on two ranks too (before: exit 1 after the 120 s collective
// timeout here, 300 s by default, the cause never printed).
TEST(FromCli, ABadSourceIsBadInputAtOnceOnAnyNumberOfRanks) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string other = " --set run_dir=" + dir.file("other");
  for (const char* np : {"", " --nproc 2"}) {
    SCOPED_TRACE(np);
    const auto t0 = std::chrono::steady_clock::now();
    const auto missing = run_cli("run " + job + np + other + " --from /nonexistent", dir.path());
    EXPECT_EQ(missing.exit_code, 2) << missing.err;
    EXPECT_NE(missing.err.find("--from /nonexistent: no such directory"), std::string::npos)
        << missing.err;
    const auto not_ckpt =
        run_cli("run " + job + np + other + " --from " + dir.file("straight"), dir.path());
    EXPECT_EQ(not_ckpt.exit_code, 2) << not_ckpt.err;
    EXPECT_NE(not_ckpt.err.find("not a checkpoint (no manifest.json"), std::string::npos)
        << not_ckpt.err;
    const auto wider = run_cli("run " + job + np + other + " --set model.width=64 --from " +
                                   dir.file("straight/checkpoints/step_00000008"),
                               dir.path());
    EXPECT_EQ(wider.exit_code, 2) << wider.err;
    EXPECT_NE(wider.err.find("a checkpoint of another model (model.width: 32 -> 64)"),
              std::string::npos)
        << wider.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
    EXPECT_FALSE(fs::exists(dir.file("other"))) << "written into the run directory";
  }
}

// A resume from step 4 of a run that reached 12 drops checkpoints 8 and 12 (the line it leaves);
// killed at step 6, the next plain resume goes on from 4 in its own line, every step logged
// once, to the weights of a run never interrupted (before: from step 12, steps 5-12 missing from
// metrics.jsonl).
TEST(FromCli, AResumeFromAnOlderCheckpointStartsALineThatTheNextResumeContinues) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string run = dir.file("line");
  const std::string at = " --set run_dir=" + run;
  ASSERT_EQ(run_cli("run " + job + at, dir.path()).exit_code, 0);
  const auto branched = run_cli("run " + job + at + " --from " + run + "/checkpoints/step_00000004",
                                dir.path(), "RM_TEST_FAULT=kill:0:6");
  EXPECT_NE(branched.exit_code, 0);
  EXPECT_NE(branched.out.find("--from step 4: removed this run's newer checkpoints (step 8, step "
                              "12)"),
            std::string::npos)
      << branched.out;
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_00000012"));
  const auto resumed = run_cli("run " + job + at, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("step_00000004 (step 4)"), std::string::npos) << resumed.out;
  expect_ended_as_straight(run, straight);
}

// The --from attempt fails before it has removed the newer checkpoints of the line it leaves
// (they go once every rank has restored; here rank 1 is killed as it starts): the restart
// goes back to --from's checkpoint and removes them then (before: it went on from the line
// left behind, the run's newest checkpoint, step 12 -- the finished run ended again, untrained).
TEST(FromCli, ARestartBeforeTheLineLeftIsRemovedGoesBackToFrom) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("again");
  const std::string at = " --set run_dir=" + run;
  ASSERT_EQ(run_cli("run " + job + at + " --nproc 2", dir.path()).exit_code, 0);
  const std::string straight = test::slurp(run + "/weights.bin");
  const std::string from = run + "/checkpoints/step_00000004";
  const auto r =
      run_cli("run " + job + at + " --nproc 2 --set resilience.max_restarts=1 --from " + from,
              dir.path(), "RM_TEST_FAULT=kill:1:0");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("restart 1 of 1 from " + from + " (--from again)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--from step 4: removed this run's newer checkpoints (step 8, step 12)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resuming from " + from + " (step 4)"), std::string::npos) << r.out;
  expect_ended_as_straight(run, straight);
}

// Once an attempt --from has started training (the line left removed, the new line saving), a
// restart goes on from the run's own newest checkpoint, even where --from's path names another
// checkpoint by then (here a link, spelled with a trailing slash as shells complete it,
// repointed to another run's checkpoint after the new line saved step 8): before, the restart
// took --from again, from that other checkpoint, and removed the new line's step 8.
TEST(FromCli, ARestartAfterTheLineStartedGoesOnWithIt) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("started");
  const std::string at = " --set run_dir=" + run;
  ASSERT_EQ(run_cli("run " + job + at, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(run + "/weights.bin");
  const std::string other = dir.file("other");  // another checkpoint of step 4 (another job)
  ASSERT_EQ(
      run_cli("run " + job + " --set train.steps=8 --set run_dir=" + other, dir.path()).exit_code,
      0);
  fs::create_directory_symlink("checkpoints/step_00000004", run + "/start");
  const test::Child r = test::spawn_cli(
      "run " + job + at + " --set resilience.max_restarts=1 --from " + run + "/start/", dir.path(),
      "r", "RM_TEST_FAULT=slowstep:0:400,kill:0:10");
  // Step 9 trains: the new line has saved its step 8 (synchronous saves; the line left's step 8
  // went as the attempt started).
  ASSERT_TRUE(test::wait_for_text(r.out, "step      9/12")) << test::slurp(r.out);
  ASSERT_NE(test::slurp(r.out).find("removed this run's newer checkpoints (step 8, step 12)"),
            std::string::npos)
      << test::slurp(r.out);
  fs::remove(run + "/start");
  fs::create_directory_symlink(other + "/checkpoints/step_00000004", run + "/start");
  ASSERT_EQ(test::wait_exit(r), 0) << test::slurp(r.err) << test::slurp(r.out);
  const std::string out = test::slurp(r.out);
  EXPECT_NE(out.find("restart 1 of 1 from " + run + "/checkpoints/step_00000008"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("(--from again)"), std::string::npos) << out;
  expect_ended_as_straight(run, straight);
}

// Another run's checkpoint starts a run directory without checkpoints of its own; one with some
// is refused (their steps up to it would stay, of an unrelated line). A restart before the first
// save of this run starts from it again (before: from the beginning, --fresh, ignoring it).
TEST(FromCli, AnotherRunsCheckpointStartsANewRunAndItsRestarts) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string source = dir.file("straight/checkpoints/step_00000008");
  const std::string other = " --set run_dir=" + dir.file("other");
  ASSERT_EQ(run_cli("run " + job + other + " --set train.steps=4", dir.path()).exit_code, 0);
  const auto refused = run_cli("run " + job + other + " --from " + source, dir.path());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("holds checkpoints of its own: give --fresh"), std::string::npos)
      << refused.err;
  const std::string fresh = " --set run_dir=" + dir.file("fresh");
  // A scratch directory (a save interrupted) is not a checkpoint of its own.
  fs::create_directories(dir.file("fresh/checkpoints/step_00000099.tmp"));
  const auto r = run_cli("run " + job + fresh + " --set resilience.max_restarts=1 --from " + source,
                         dir.path(), "RM_TEST_FAULT=kill:0:10");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("restart 1 of 1"), std::string::npos) << r.out;
  size_t from_source = 0;
  for (size_t at = 0; (at = r.out.find("resuming from " + source, at)) != std::string::npos; ++at) {
    ++from_source;
  }
  EXPECT_EQ(from_source, 2u) << r.out;
  EXPECT_EQ(test::slurp(dir.file("fresh/weights.bin")),
            test::slurp(dir.file("straight/weights.bin")));
}

// Another run's checkpoint at or past this job's train.steps: nothing is trained, and the run
// says so instead of only "done"; its end is the checkpoint's weights.
TEST(FromCli, AFromAtOrPastTheEndSaysNoStepIsTrained) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string source = dir.file("straight/checkpoints/step_00000012");
  const auto r = run_cli("run " + job + " --set run_dir=" + dir.file("short") +
                             " --set train.steps=8 --from " + source,
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("--from " + source +
                       ": its step 12 is at or past train.steps (8): no step to train"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(test::slurp(dir.file("short/weights.bin")),
            test::slurp(dir.file("straight/weights.bin")));
}

// The same with checkpoints in memory: the line left behind held step 10 in memory (disk: 4 and
// 8); the --from attempt, killed before its own first save, must not leave it there for the next
// resume to go back to (it would resume at 10, steps 5-10 of this line missing).
TEST(FromCli, ALineLeftBehindLeavesNothingInMemory) {
  TempDir dir;
  const std::string job = job_file(dir) + " --set checkpoint.memory_every=1";
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string run = dir.file("line");
  const std::string at = " --set run_dir=" + run;
  ASSERT_NE(run_cli("run " + job + at, dir.path(), "RM_TEST_FAULT=kill:0:11").exit_code, 0);
  const auto branched = run_cli("run " + job + at + " --from " + run + "/checkpoints/step_00000004",
                                dir.path(), "RM_TEST_FAULT=kill:0:5");
  EXPECT_NE(branched.exit_code, 0);
  const auto resumed = run_cli("run " + job + at, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.out.find("resuming from memory"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("step_00000004 (step 4)"), std::string::npos) << resumed.out;
  expect_ended_as_straight(run, straight);
}

// A batch script of one's own passes the same --from on every Slurm requeue. Once the line it
// started has a checkpoint, the same --from again goes on with that line: before, it removed the
// line's progress each time and trained it again (here: step 8 removed, resumed at 4).
TEST(FromCli, TheSameFromAgainGoesOnWithTheLineItStarted) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string run = dir.file("line");
  const std::string again =
      "run " + job + " --set run_dir=" + run + " --from " + run + "/checkpoints/step_00000004";
  ASSERT_EQ(run_cli("run " + job + " --set run_dir=" + run, dir.path()).exit_code, 0);
  const auto first = run_cli(again, dir.path(), "RM_TEST_FAULT=kill:0:10");
  EXPECT_NE(first.exit_code, 0);
  EXPECT_NE(first.out.find("removed this run's newer checkpoints (step 8, step 12)"),
            std::string::npos)
      << first.out;
  ASSERT_TRUE(fs::exists(run + "/checkpoints/step_00000008"));
  const auto requeued = run_cli(again, dir.path());
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err << requeued.out;
  expect_goes_on_at_step_8(requeued);
  EXPECT_EQ(requeued.out.find("removed this run's newer checkpoints"), std::string::npos)
      << requeued.out;
  expect_ended_as_straight(run, straight);
  // Another checkpoint (or the line's start after the line finished: a new line) is obeyed.
  const auto other =
      run_cli("run " + job + " --set run_dir=" + run + " --set train.steps=16 --from " + run +
                  "/checkpoints/step_00000008",
              dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.out.find("removed this run's newer checkpoints (step 12)"), std::string::npos)
      << other.out;
}

// A restart before the line's first save resumes from the line's start as the run's own checkpoint,
// whose state records the line *it* was on: the line's next checkpoints recorded that one, and the
// same --from again removed them (found by a review). RUN_DIR/line.json says which line it is.
TEST(FromCli, TheLineSurvivesARestartBeforeItsFirstSave) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string run = dir.file("line");
  const std::string at = " --set run_dir=" + run;
  const std::string again = "run " + job + at + " --from " + run + "/checkpoints/step_00000004";
  ASSERT_EQ(run_cli("run " + job + at, dir.path()).exit_code, 0);
  EXPECT_NE(run_cli(again, dir.path(), "RM_TEST_FAULT=kill:0:6").exit_code, 0);
  // The restart (as `run`'s supervisor makes it once the run has a checkpoint): no --from.
  EXPECT_NE(run_cli("run " + job + at, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code, 0);
  ASSERT_TRUE(fs::exists(run + "/checkpoints/step_00000008"));
  const auto requeued = run_cli(again, dir.path());
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err << requeued.out;
  expect_goes_on_at_step_8(requeued);
  expect_ended_as_straight(run, straight);
}

// The same with another run's checkpoint (fine-tuning from it) and retention that removed the
// line's start from the run directory: the requeue was refused (the run directory "holds
// checkpoints of its own"), or found no --from directory at all.
TEST(FromCli, TheSameFromAgainGoesOnWhereverItsStartIs) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  // Another run's checkpoint.
  const std::string tuned = " --set run_dir=" + dir.file("tuned");
  const std::string from_other = " --from " + dir.file("straight/checkpoints/step_00000004");
  EXPECT_NE(
      run_cli("run " + job + tuned + from_other, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code,
      0);
  const auto requeued = run_cli("run " + job + tuned + from_other, dir.path());
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err << requeued.out;
  EXPECT_NE(requeued.out.find("step_00000008 (step 8)"), std::string::npos) << requeued.out;
  EXPECT_EQ(test::slurp(dir.file("tuned/weights.bin")), straight);
  // The run's own checkpoint, gone since (checkpoint.keep: 1).
  const std::string run = dir.file("kept");
  const std::string at = " --set run_dir=" + run + " --set checkpoint.keep=1";
  const std::string from_own = " --from " + run + "/checkpoints/step_00000004";
  EXPECT_NE(run_cli("run " + job + at, dir.path(), "RM_TEST_FAULT=kill:0:6").exit_code, 0);
  EXPECT_NE(run_cli("run " + job + at + from_own, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code,
            0);
  ASSERT_FALSE(fs::exists(run + "/checkpoints/step_00000004"));
  const auto gone = run_cli("run " + job + at + from_own, dir.path());
  ASSERT_EQ(gone.exit_code, 0) << gone.err << gone.out;
  EXPECT_NE(gone.out.find("goes on from it already"), std::string::npos) << gone.out;
  expect_ended_as_straight(run, straight);
}

// The line's checkpoints all damaged: the same --from again starts from it again (on 2 ranks,
// which must agree on where they resume from).
TEST(FromCli, TheSameFromAgainStartsOverWhenNothingOfItsLineVerifies) {
  TempDir dir;
  const std::string job = job_file(dir) + " --nproc 2";
  const std::string run = dir.file("straight");
  const std::string again = "run " + job + " --from " + run + "/checkpoints/step_00000004";
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  EXPECT_NE(run_cli(again, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code, 0);
  ASSERT_TRUE(flip_a_byte(run + "/checkpoints/step_00000008/shard_00000.bin"));
  const auto r = run_cli(again, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("no checkpoint of the run that goes on from it verifies"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step_00000004 (step 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("removed this run's newer checkpoints (step 8)"), std::string::npos)
      << r.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
}

// Another run's checkpoint under a job that trains otherwise: the keys that differ are said as
// the run starts from it (here the seed, so the data order from step 4 is not the one it trained
// on; before: nothing said). Under other data it is refused, and the refusal points to
// model.init_from, the way to train other data from its weights (before: it advised --fresh or a
// new run_dir, which fail the same way).
TEST(FromCli, AnotherJobsCheckpointSaysHowTheJobsDifferAndOtherDataPointsToInitFrom) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job + " --set train.steps=4", dir.path()).exit_code, 0);
  const std::string from = " --from " + dir.file("straight/checkpoints/step_00000004");
  const auto seeded = run_cli(
      "run " + job + " --set train.steps=6 --set seed=7 --set run_dir=" + dir.file("seeded") + from,
      dir.path());
  ASSERT_EQ(seeded.exit_code, 0) << seeded.err << seeded.out;
  EXPECT_NE(seeded.out.find("written by a job that trained otherwise (seed: 1337 -> 7); it goes on "
                            "under this job's settings"),
            std::string::npos)
      << seeded.out;
  const std::string shorter = dir.file("short.txt");
  std::ofstream(shorter) << test::slurp("data/tinyshakespeare.txt").substr(0, 600000);
  const auto other = run_cli(
      "run " + job + " --set data.train=" + shorter + " --set run_dir=" + dir.file("other") + from,
      dir.path());
  EXPECT_EQ(other.exit_code, 2) << other.err << other.out;
  EXPECT_NE(other.err.find("name it as model.init_from instead of --from"), std::string::npos)
      << other.err;
  EXPECT_EQ(other.err.find("--fresh"), std::string::npos) << other.err;
}

// The line ended, then its checkpoints were damaged: the same --from again (a requeue after the
// end) is refused on every rank, as the run without --from is, and weights.bin -- the only copy
// of that end -- stays, with the damaged checkpoints. Before: the line started over from step 4,
// removing weights.bin and every checkpoint past step 4.
TEST(FromCli, TheSameFromAgainKeepsTheEndOfALineNoneOfWhoseCheckpointsVerifies) {
  TempDir dir;
  const std::string job = job_file(dir) + " --nproc 2";
  const std::string run = dir.file("straight");
  const std::string again = "run " + job + " --from " + run + "/checkpoints/step_00000004";
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  ASSERT_EQ(run_cli(again, dir.path()).exit_code, 0);  // the line, to its end
  const std::string end = test::slurp(run + "/weights.bin");
  ASSERT_FALSE(end.empty());
  for (const char* step : {"step_00000008", "step_00000012"}) {
    ASSERT_TRUE(flip_a_byte(run + "/checkpoints/" + step + "/shard_00001.bin")) << step;
  }
  const auto r = run_cli(again, dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("holds the end (weights.bin) of the line --from"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("starting from it again"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), end);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000012"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000008"));
}

// The line left is removed the way retention removes: a reader of one of its checkpoints (here
// `ckpt inspect`, held between its pin and its read) is waited for, not pulled from under (before:
// removed at once, the reader failed on files gone). And checkpoints/best, which led to the line
// left's best (step 8 or 12), leads to the best of those kept (step 4) at once: before, it led
// nowhere until the new line's next save.
TEST(FromCli, TheLineLeftWaitsForItsReadersAndTheBestLinkFollows) {
  TempDir dir;
  const std::string job = job_file(dir) +
                          " --set train.eval_every=4 --set train.eval_batches=2"
                          " --set data.val_fraction=0.1 --set checkpoint.keep_best=true";
  const std::string run = dir.file("straight");
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string link = run + "/checkpoints/best";
  ASSERT_NE(fs::read_symlink(link).string(), "step_00000004") << "the test would check nothing";
  const std::string newest = run + "/checkpoints/step_00000012";
  // The read outlasts the run's start up to removing the line it leaves (supervisor, rank,
  // data, model: seconds under ASan on a loaded machine), or no wait would be seen.
  const test::Child reader = test::spawn_cli("ckpt inspect " + newest, dir.path(), "inspect",
                                             "RM_TEST_READ_PAUSE_MS=9000");
  ASSERT_TRUE(test::wait_for_text(reader.err, "pinned, reading"));
  const auto r = run_cli("run " + job + " --from " + run + "/checkpoints/step_00000004", dir.path(),
                         "RM_TEST_FAULT=kill:0:6");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("removed this run's newer checkpoints (step 8, step 12)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step_00000012: waiting up to "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("that reader fails"), std::string::npos) << r.out;
  EXPECT_EQ(test::wait_exit(reader), 0) << test::slurp(reader.err);
  EXPECT_NE(test::slurp(reader.out).find("step_00000012"), std::string::npos)
      << test::slurp(reader.out);
  EXPECT_FALSE(fs::exists(newest));
  EXPECT_EQ(fs::read_symlink(link).string(), "step_00000004");
  EXPECT_TRUE(fs::exists(link)) << "checkpoints/best leads nowhere";
}

// The same --from again through a link the user made, spelled with a trailing slash (as a
// shell's completion writes it), once the link points elsewhere: it names the line's start by
// its name, and the run goes on with its line. Before: "start/" was not taken for a link, and
// the rerun started over from what the link named now, removing the line's progress.
TEST(FromCli, TheSameFromAgainThroughALinkGoesOnWhereverTheLinkPointsNow) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string start = dir.file("start");
  fs::create_directory_symlink(dir.file("straight/checkpoints/step_00000004"), start);
  const std::string again =
      "run " + job + " --set run_dir=" + dir.file("tuned") + " --from " + start + "/";
  EXPECT_NE(run_cli(again, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code, 0);
  ASSERT_TRUE(fs::exists(dir.file("tuned/checkpoints/step_00000008")));
  fs::remove(start);
  fs::create_directory_symlink(dir.file("straight/checkpoints/step_00000008"), start);
  const auto requeued = run_cli(again, dir.path());
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err << requeued.out;
  EXPECT_NE(requeued.out.find("goes on from it already"), std::string::npos) << requeued.out;
  EXPECT_NE(requeued.out.find(dir.file("tuned/checkpoints/step_00000008") + " (step 8)"),
            std::string::npos)
      << requeued.out;
  EXPECT_EQ(test::slurp(dir.file("tuned/weights.bin")), straight);
}

// A run from another run's checkpoint with checkpoints in memory, failing before its first disk
// save: the restart (--from again, as the run has no checkpoint of its own) goes on from what
// memory holds of the line (line.json says which line that is), not from the start again, and the
// line's checkpoints still record where it began, so the same --from later goes on with it.
// Before: the restart took --from for a new line, discarding memory's steps 5-9.
TEST(FromCli, ARestartBeforeALinesFirstDiskSaveGoesOnFromMemory) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string tuned = " --set run_dir=" + dir.file("tuned") +
                            " --set checkpoint.memory_every=1 --set checkpoint.every=12";
  const std::string from = " --from " + dir.file("straight/checkpoints/step_00000004");
  const auto r = run_cli("run " + job + tuned + " --set resilience.max_restarts=1" + from,
                         dir.path(), "RM_TEST_FAULT=kill:0:10");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("has saved no checkpoint on disk yet: going on with it"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resuming from memory (step 9; no disk checkpoint)"), std::string::npos)
      << r.out;
  EXPECT_EQ(test::slurp(dir.file("tuned/weights.bin")), straight);
  const auto again = run_cli("run " + job + tuned + " --set train.steps=16" + from, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
  EXPECT_NE(again.out.find("goes on from it already"), std::string::npos) << again.out;
}

// With checkpoint.keep_best, a line from another run's checkpoint restarted from memory before
// its first disk save keeps the best its start recorded (step 4's), as a resume from the start
// itself does. The line diverges (lr 1): no evaluation of it beats step 4's. Before: the best was
// forgotten (0), step 8's worse evaluation counted as a new best -- a save at step 8, the run's
// checkpoints/best, and a best_step of 12 in the end's manifest.
TEST(FromCli, ALineRestartedFromMemoryKeepsTheBestOfItsStart) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string best =
      " --set train.eval_every=4 --set train.eval_batches=2"
      " --set checkpoint.keep_best=true";
  ASSERT_EQ(run_cli("run " + job + best, dir.path()).exit_code, 0);
  const std::string tuned = dir.file("tuned");
  const auto r = run_cli("run " + job + best + " --set run_dir=" + tuned +
                             " --set optimizer.lr=1 --set optimizer.warmup_steps=0"
                             " --set checkpoint.memory_every=1 --set checkpoint.every=12"
                             " --set resilience.max_restarts=1 --from " +
                             dir.file("straight/checkpoints/step_00000004"),
                         dir.path(), "RM_TEST_FAULT=kill:0:7");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("resuming from memory (step 6; no disk checkpoint)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(tuned + "/checkpoints/step_00000008")) << "saved as a new best";
  const std::string end = test::slurp(tuned + "/checkpoints/step_00000012/manifest.json");
  EXPECT_NE(end.find("\"best_step\": 4,"), std::string::npos) << end;
}

// The same from the run's own older checkpoint (its newest whole checkpoint is then the line's
// start itself, whose state records the line *it* was on; line.json names it): the same --from
// again goes on from memory too (found by a review: it started from step 4 again).
TEST(FromCli, TheSameFromAgainBeforeALinesFirstDiskSaveGoesOnFromMemory) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(dir.file("straight/weights.bin"));
  const std::string run = dir.file("line");
  const std::string at = " --set run_dir=" + run;
  ASSERT_EQ(run_cli("run " + job + at, dir.path()).exit_code, 0);
  const std::string again = "run " + job + at +
                            " --set checkpoint.memory_every=1 --set checkpoint.every=100 --from " +
                            run + "/checkpoints/step_00000004";
  EXPECT_NE(run_cli(again, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code, 0);
  const auto r = run_cli(again, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("has saved no checkpoint on disk yet: going on with it"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resuming from memory (step 9; disk: step 4)"), std::string::npos) << r.out;
  expect_ended_as_straight(run, straight);
}

// A line.json left by a --from line that never saved, then a start at step 0 (memory held
// nothing of it) that trains into memory: the same --from after that starts from it, as memory
// holds another line's steps (found by a review: it went on from them, recorded as that line's).
TEST(FromCli, MemoryOfAStartAtStepZeroIsNotTakenForTheLineOfAnEarlierFrom) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string tuned = " --set run_dir=" + dir.file("tuned") + " --set checkpoint.every=100";
  const std::string from = " --from " + dir.file("straight/checkpoints/step_00000004");
  EXPECT_NE(run_cli("run " + job + tuned + from, dir.path(), "RM_TEST_FAULT=kill:0:6").exit_code,
            0);
  ASSERT_TRUE(fs::exists(dir.file("tuned/line.json")));
  const std::string memory = " --set checkpoint.memory_every=1";
  EXPECT_NE(run_cli("run " + job + tuned + memory, dir.path(), "RM_TEST_FAULT=kill:0:10").exit_code,
            0);
  EXPECT_FALSE(fs::exists(dir.file("tuned/line.json")));
  const auto r = run_cli("run " + job + tuned + memory + from, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("going on with it"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("resuming from memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step_00000004 (step 4)"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(dir.file("tuned/weights.bin")),
            test::slurp(dir.file("straight/weights.bin")));
}

// A --from resume of a finished run killed as it removes the line it leaves (its first removal:
// line.json and the weights.bin of the old end are gone by then, the old line's checkpoints all
// there): the restart goes back to --from and ends as the run never interrupted.
TEST(FromCli, AFromKilledAsItRemovesTheLineItLeavesEndsAsIfNeverKilled) {
  TempDir dir;
  const std::string job = job_file(dir) + " --nproc 2";  // ranks under MPI: faults from start-up
  const std::string run = dir.file("straight");
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string straight = test::slurp(run + "/weights.bin");
  const auto r = run_cli("run " + job + " --set resilience.max_restarts=1 --from " + run +
                             "/checkpoints/step_00000004",
                         dir.path(), "RM_TEST_FAULT=savekill:0:1");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("RM_TEST_FAULT: savekill"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("restart 1 of 1 from " + run + "/checkpoints/step_00000004 (--from again)"),
            std::string::npos)
      << r.out;
  expect_ended_as_straight(run, straight);
}

}  // namespace
}  // namespace rm

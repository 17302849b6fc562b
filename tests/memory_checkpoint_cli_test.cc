// checkpoint.memory_every through the real binary, real ranks, real SIGKILLs and real /dev/shm
// (worker/memory_checkpoints.h): a rank killed mid-run is restarted by `run` from the step
// before the kill, held in memory, not from the older disk checkpoint, and the run ends bit for
// bit on the uninterrupted run's weights; a flipped byte in the newest slot is caught and the
// older slot used, named; a slot damaged after the ranks agreed on it makes them resume from
// the disk in the same attempt; a rank killed mid-copy resumes from its slot before; two
// failures in a row each cost one step; --fresh never reads an earlier run's segments; a run that
// finishes leaves none, and a crashed run's go once its directory is removed.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/memory_snapshot.h"
#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// Disk checkpoints every 4 steps, memory every step: a kill at the start of step 7 finds the
// disk at step 4 and memory at step 6.
std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: memory
run_dir: )" + dir.file("straight") +
                                   R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 10, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 2, async: false, memory_every: 1}
parallel: {threads_per_rank: 1, timeout_s: 30}
)");
}

// The segment worker/memory_checkpoints.cc names for rank r of the run in run_dir.
std::string segment_path(const std::string& run_dir, int rank) {
  const std::string dir = fs::absolute(run_dir).lexically_normal().string();
  return "/dev/shm" + memory_snapshot_name(XXH64(dir.data(), dir.size(), 0), rank);
}

std::string np(int ranks) { return " --nproc " + std::to_string(ranks); }

// For a run of 3 ranks on the 2-core machine: under ASan (CI's sanitize stage) no leak check at
// the ranks' exit. LeakSanitizer's own tracer died of SIGSEGV with 4 ranks on 2 loaded cores in
// two CI runs (tests/reshard_cli_test.cc); these runs' leaks are the 2-rank runs' code.
const char* const kNoLeakCheck = "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\"";

// Ranks and shard mode. Each rank keeps only its slice of the state; the restore gathers the
// rest, so every mode's gathers are exercised with two ranks.
class MemoryCheckpoint : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(MemoryCheckpoint, AKilledRankResumesFromMemoryAndLosesAtMostOneStep) {
  const int ranks = std::get<0>(GetParam());
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string setup = np(ranks) + " --set parallel.shard=" + std::get<1>(GetParam());
  ASSERT_EQ(run_cli("run " + job + setup, dir.path()).exit_code, 0);
  for (int r = 0; r < ranks; ++r) {
    EXPECT_FALSE(fs::exists(segment_path(dir.file("straight"), r))) << "a finished run's segment";
  }
  const std::string run = dir.file("restarted");
  const std::string victim = std::to_string(ranks - 1);
  const auto r = run_cli("run " + job + setup + " --set run_dir=" + run +
                             " --set resilience.max_restarts=1 --set cluster.env.RM_TEST_FAULT=kill:" +
                             victim + ":7",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("resuming from memory (step 6; disk: step 4)"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
  EXPECT_EQ(test::losses_by_step(run + "/metrics.jsonl"),
            test::losses_by_step(dir.file("straight/metrics.jsonl")));
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_NE(events.find(R"("from":"memory")"), std::string::npos) << events;
  for (int k = 0; k < ranks; ++k) {
    EXPECT_FALSE(fs::exists(segment_path(run, k))) << "rank " << k << "'s segment was left";
  }
}

INSTANTIATE_TEST_SUITE_P(RanksAndModes, MemoryCheckpoint,
                         ::testing::Values(std::make_tuple(1, "none"), std::make_tuple(2, "none"),
                                           std::make_tuple(2, "optimizer"),
                                           std::make_tuple(2, "full")));

// The job on 2 ranks uninterrupted (into "straight"), then into `run` with RM_TEST_FAULT=`faults`
// and `restarts` restarts allowed: what the second run printed.
test::CliResult straight_then_faulted(const TempDir& dir, const std::string& job,
                                      const std::string& run, int restarts,
                                      const std::string& faults) {
  const test::CliResult straight = run_cli("run " + job + np(2), dir.path());
  EXPECT_EQ(straight.exit_code, 0) << straight.err << straight.out;
  return run_cli("run " + job + np(2) + " --set run_dir=" + run +
                     " --set resilience.max_restarts=" + std::to_string(restarts) +
                     " --set cluster.env.RM_TEST_FAULT=" + faults,
                 dir.path());
}

// Two failures in a row: rank 0 killed at step 6, then, in the restart from memory, rank 1
// killed at step 8 (RM_TEST_FAULT's @1: the first restart). Each restart resumes from memory at
// the step before its kill, and the run ends on the uninterrupted run's weights, bit for bit.
TEST(MemoryCheckpointTwice, TwoFailuresInARowEachCostOneStep) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("twice");
  const test::CliResult r = straight_then_faulted(dir, job, run, 2, "kill:0:6,kill:1:8@1");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const size_t first = r.out.find("resuming from memory (step 5; disk: step 4)");
  const size_t second = r.out.find("resuming from memory (step 7; disk: step 4)");
  EXPECT_NE(first, std::string::npos) << r.out;
  EXPECT_NE(second, std::string::npos) << r.out;
  EXPECT_LT(first, second) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
  for (int k = 0; k < 2; ++k) EXPECT_FALSE(fs::exists(segment_path(run, k))) << "rank " << k;
}

// Rank 1 SIGKILLed in the middle of its in-memory save of step 6 (RM_TEST_FAULT=memkill: its
// first chunk copied, the slot not committed): its segment holds step 5 only, so every rank
// resumes from step 5 -- the half-written slot never counted -- and ends on the same weights.
TEST(MemoryCheckpointMidCopy, ARankKilledInItsSaveResumesFromTheSlotBefore) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("midcopy");
  const test::CliResult r = straight_then_faulted(dir, job, run, 1, "memkill:1:6");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("RM_TEST_FAULT: memkill at step 6"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("resuming from memory (step 5; disk: step 4); in memory: rank 0 holds "
                       "steps 6, 5; rank 1 holds step 5"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
}

// Before the first disk checkpoint the restart does not start over (`run` restarted with --fresh
// when no checkpoint verified, which would discard the segments).
TEST(MemoryCheckpointEarly, BeforeAnyDiskCheckpointTheRestartResumesFromMemory) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("early");
  const auto r = run_cli("run " + job + " --set run_dir=" + run +
                             " --set resilience.max_restarts=1 --set "
                             "cluster.env.RM_TEST_FAULT=kill:0:3",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("restart 1 of 1 from memory if newer, else the beginning"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resuming from memory (step 2; no disk checkpoint)"), std::string::npos)
      << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
}

// The data changed between a crash and the resume from memory (a shorter file at the same
// path): refused, as a resume from a disk checkpoint is, naming both counts -- the data order
// depends on the number of windows (before: the run went on from memory in another order,
// silently, and its next disk save recorded the new count, so nothing ever caught it).
TEST(MemoryCheckpointData, AResumeFromMemoryOverChangedDataIsRefused) {
  TempDir dir;
  const std::string text = test::slurp("data/tinyshakespeare.txt");
  const std::string data = dir.write("data.txt", text.substr(0, 20000));
  const std::string job = job_file(dir) + " --set data.train=" + data;
  const std::string run = dir.file("run");
  const auto killed =
      run_cli("run " + job + " --set run_dir=" + run + " --set cluster.env.RM_TEST_FAULT=kill:0:3",
              dir.path());
  ASSERT_NE(killed.exit_code, 0) << killed.out;
  dir.write("data.txt", text.substr(0, 15000));
  const auto r = run_cli("run " + job + " --set run_dir=" + run, dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("where the in-memory checkpoint resumed from was trained on"),
            std::string::npos)
      << r.err << r.out;
  EXPECT_NE(r.err.find("the data changed since"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(run + "/weights.bin"));
  // The data put back, the run goes on from memory and ends as if never killed.
  dir.write("data.txt", text.substr(0, 20000));
  const auto back = run_cli("run " + job + " --set run_dir=" + run, dir.path());
  ASSERT_EQ(back.exit_code, 0) << back.err << back.out;
  EXPECT_NE(back.out.find("resuming from memory (step 2; no disk checkpoint)"), std::string::npos)
      << back.out;
}

// The end's save cut short after every rank held the last step in memory (rank 1 killed in its
// shard of step 10, slowed so that its memory save comes first): the restart resumes from memory
// at the last step and trains none, and still saves the end's checkpoint (before: none, the
// memory then removed, the end's optimizer state lost and a longer train.steps refused).
TEST(MemoryCheckpointEnd, ARestartFromMemoryAtTheLastStepSavesTheEnd) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string async = np(2) + " --set checkpoint.async=true";
  ASSERT_EQ(run_cli("run " + job + async, dir.path()).exit_code, 0);
  const std::string run = dir.file("end");
  const auto r = run_cli("run " + job + async + " --set run_dir=" + run +
                             " --set resilience.max_restarts=1 --set "
                             "cluster.env.RM_TEST_FAULT=savekill:1:12,slowio:1:100000",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  ASSERT_NE(r.out.find("resuming from memory (step 10; disk: step 8)"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  const auto verify = run_cli("ckpt verify " + run + "/checkpoints/step_00000010", dir.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const auto longer =
      run_cli("run " + job + async + " --set run_dir=" + run + " --set train.steps=12", dir.path());
  EXPECT_EQ(longer.exit_code, 0) << longer.err << longer.out;
  EXPECT_NE(longer.out.find("step_00000010 (step 10)"), std::string::npos) << longer.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
}

// The 10-step job on 2 ranks into dir/ended, disk checkpoints every 5 and memory every
// `memory_every` steps, its end's disk save failing (ENOSPC at its first fsync, on_error:
// continue): the job's command line without `run`, once the run has ended with its segments kept.
std::string end_without_its_disk_save(const TempDir& dir, int memory_every) {
  const std::string run = dir.file("ended");
  const std::string job =
      job_file(dir) + np(2) + " --set run_dir=" + run +
      " --set checkpoint.every=5 --set checkpoint.memory_every=" + std::to_string(memory_every) +
      " --set checkpoint.on_error=continue";
  const std::string fail_end_save =
      "RM_TEST_IO_FAULT='scope=" + run + " journal=" + dir.file("journal") + " count_under=" + run +
      "/checkpoints start_at=step_00000010 op=fsync at=1 action=fail error=ENOSPC rank=0'";
  const auto ended = run_cli("run " + job, dir.path(), fail_end_save);
  EXPECT_EQ(ended.exit_code, 0) << ended.err << ended.out;
  EXPECT_NE(ended.out.find("in-memory checkpoints kept: a checkpoint save failed"),
            std::string::npos)
      << ended.out;
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_00000010"));
  EXPECT_TRUE(fs::exists(run + "/weights.bin"));
  return job;
}

// The end's disk save fails (ENOSPC at its first fsync, checkpoint.on_error: continue) while
// memory, every 4 steps, holds step 8 of a 10-step run: the run ends, writes weights.bin and keeps
// its segments. Extended to 12 steps, it is refused (exit 2) and weights.bin, the only copy of
// step 10, stays: going on from memory's step 8 would have removed it (before: it did, and
// trained 9-12 from there). With weights.bin moved out, the same command goes on from memory.
TEST(MemoryCheckpointEnd, AFinishedRunWhoseEndMemoryLacksIsNotGoneOnFromAnEarlierStep) {
  TempDir dir;
  const std::string run = dir.file("ended");
  const std::string job = end_without_its_disk_save(dir, 4);
  ASSERT_FALSE(testing::Test::HasFailure());
  const std::string end = test::slurp(run + "/weights.bin");

  const auto longer = run_cli("run " + job + " --set train.steps=12", dir.path());
  test::expect_refused(longer,
                       "holds a finished run whose end (weights.bin) is newer than its "
                       "newest checkpoint that verifies (step 5");
  EXPECT_NE(longer.out.find("not from memory: step 8 is before the run's end at step 10 "
                            "(weights.bin)"),
            std::string::npos)
      << longer.out;
  EXPECT_TRUE(test::slurp(run + "/weights.bin") == end) << "weights.bin removed or changed";
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));

  fs::rename(run + "/weights.bin", dir.file("end.bin"));
  const auto moved = run_cli("run " + job + " --set train.steps=12", dir.path());
  ASSERT_EQ(moved.exit_code, 0) << moved.err << moved.out;
  EXPECT_NE(moved.out.find("resuming from memory (step 8; disk: step 5)"), std::string::npos)
      << moved.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
  for (int r = 0; r < 2; ++r) EXPECT_FALSE(fs::exists(segment_path(run, r))) << r;
}

// The same end, memory every 5 steps: memory holds the end (step 10), which no disk checkpoint
// does. Extended, the run goes on from it -- neither the launcher's check of a finished run
// before anything is written (it cannot see memory) nor the resume refuses it.
TEST(MemoryCheckpointEnd, AFinishedRunWhoseEndOnlyMemoryHoldsGoesOnFromIt) {
  TempDir dir;
  const std::string run = dir.file("ended");
  const std::string job = end_without_its_disk_save(dir, 5);
  ASSERT_FALSE(testing::Test::HasFailure());
  const auto longer = run_cli("run " + job + " --set train.steps=12", dir.path());
  ASSERT_EQ(longer.exit_code, 0) << longer.err << longer.out;
  EXPECT_NE(longer.out.find("resuming from memory (step 10; disk: step 5)"), std::string::npos)
      << longer.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
  for (int r = 0; r < 2; ++r) EXPECT_FALSE(fs::exists(segment_path(run, r))) << r;
}

// Rank 0 killed as it commits the end's checkpoint: the other rank kept its memory checkpoint
// until the commit (before: it removed it once its own shard was written), so the restart
// resumes from memory at the last step, not from the disk two steps before.
TEST(MemoryCheckpointEnd, ARankKilledCommittingLeavesTheOthersTheirMemory) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string async = np(2) + " --set checkpoint.async=true";
  const std::string run = dir.file("commit");
  const auto r = run_cli("run " + job + async + " --set run_dir=" + run +
                             " --set resilience.max_restarts=1 --set "
                             "cluster.env.RM_TEST_FAULT=savekill:0:21",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("savekill at checkpoint phase event 21 (commit:"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("resuming from memory (step 10; disk: step 8); in memory: rank 0 holds "
                       "steps 10, 9; rank 1 holds steps 10, 9"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
}

// Flips one byte of slot `slot` of the segment at `segment` (a 4096-byte header page, then two
// slots of equal, page-rounded size; saves alternate slots from slot 0 at step 1).
void flip_byte_in_slot(const std::string& segment, int slot) {
  const auto size = fs::file_size(segment);
  const std::streamoff at = 4096 + slot * static_cast<std::streamoff>((size - 4096) / 2) + 5000;
  std::fstream f(segment, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x01;
  f.seekp(at);
  f.write(&c, 1);
}

// The same kill with no restart leaves the segments (steps 5 and 6); a byte flipped in the
// newest slot makes the rerun take step 5, saying why, and still end on the same weights.
TEST(MemoryCheckpointDamage, AFlippedByteIsCaughtAndTheOlderSlotIsUsed) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("damaged");
  const auto crashed = run_cli(
      "run " + job + " --set run_dir=" + run + " --set cluster.env.RM_TEST_FAULT=kill:0:7",
      dir.path());
  ASSERT_NE(crashed.exit_code, 0) << crashed.out;
  const std::string segment = segment_path(run, 0);
  ASSERT_TRUE(fs::exists(segment)) << "a crashed run keeps its segment";
  flip_byte_in_slot(segment, 1);  // step 6's: saves alternate slots from slot 0 at step 1
  const auto r = run_cli("run " + job + " --set run_dir=" + run, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("resuming from memory (step 5; disk: step 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("slot 1 skipped: checksum mismatch"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
  EXPECT_FALSE(fs::exists(segment));
}

// The job on 2 ranks (`flags` added) uninterrupted into "straight", then into `run` killed at step
// 7, then again with resilience.max_restarts 1 and rank 1 paused between the ranks' agreement
// on step 6 (verified then) and its restore, while a byte of step 6's slot of its segment is
// flipped: what that last run printed (stdout, then stderr), once it ended with exit code 0.
std::string damaged_during_restore(const TempDir& dir, const std::string& flags,
                                   const std::string& run) {
  const std::string job = job_file(dir);
  EXPECT_EQ(run_cli("run " + job + flags, dir.path()).exit_code, 0);
  const std::string setup = "run " + job + flags + " --set run_dir=" + run;
  const auto crashed = run_cli(setup + " --set cluster.env.RM_TEST_FAULT=kill:1:7", dir.path());
  EXPECT_NE(crashed.exit_code, 0) << crashed.out;
  const std::string segment = segment_path(run, 1);
  if (!fs::exists(segment)) {
    ADD_FAILURE() << "a crashed run keeps its segment";
    return "";
  }
  const test::Child c = test::spawn_cli(
      setup + " --set resilience.max_restarts=1 --set cluster.env.RM_TEST_FAULT=slowrestore:1:4000",
      dir.path());
  EXPECT_TRUE(test::wait_for_text(run + "/logs/rank-1.log", "RM_TEST_FAULT: slowrestore"))
      << test::slurp(c.out) << test::slurp(c.err);
  flip_byte_in_slot(segment, 1);
  const int code = test::wait_exit(c);
  const std::string out = test::slurp(c.out) + test::slurp(c.err);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(dir.file("straight/weights.bin")));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
  EXPECT_FALSE(fs::exists(segment));
  return out;
}

// Every rank gives memory up together and the same attempt resumes from the disk, instead of
// failing -- a restart would agree on memory again, and a failure that does not go away (a
// replica that cannot arrive whole) would end the run after resilience.max_restarts.
TEST(MemoryCheckpointDamage, ASlotThatFailsItsRestoreFallsBackToTheDiskInTheSameAttempt) {
  TempDir dir;
  const std::string run = dir.file("damaged");
  const std::string out = damaged_during_restore(dir, np(2), run);
  // The failing rank is named, and says why in its own log (before: "on 1 rank(s)", its reason
  // nowhere).
  EXPECT_NE(out.find("in-memory checkpoint of step 6: not restored on rank 1 (why: in each one's "
                     "log); resuming from the disk instead (in memory: rank 0 holds steps 6, 5; "
                     "rank 1 holds steps 6, 5)"),
            std::string::npos)
      << out;
  const std::string log1 = test::slurp(run + "/logs/rank-1.log");
  EXPECT_NE(log1.find("[rank 1] in-memory checkpoint of step 6: not restored on rank 1: this "
                      "rank: "),
            std::string::npos)
      << log1;
  EXPECT_NE(out.find("checkpoints/step_00000004 (step 4)"), std::string::npos) << out;
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_NE(events.find(R"("event":"memory_restore_failed")"), std::string::npos) << events;
  EXPECT_EQ(events.find(R"("event":"restart")"), std::string::npos) << "a restart: " << events;
}

// With no disk checkpoint to fall back on, the state is partly the damaged slot's: the attempt
// ends instead of training from step 0 on it, and its restart (the segments gone) starts anew.
TEST(MemoryCheckpointDamage,
     WithNoDiskCheckpointAFailedRestoreEndsTheAttemptAndTheRestartStartsAnew) {
  TempDir dir;
  const std::string run = dir.file("damaged");
  const std::string out = damaged_during_restore(dir, np(2) + " --set checkpoint.every=100", run);
  EXPECT_NE(out.find("the in-memory checkpoint could not be restored and no disk checkpoint "
                     "verifies"),
            std::string::npos)
      << out;
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_NE(events.find(R"("event":"restart")"), std::string::npos) << events;
}

// --fresh (and a run directory made anew) starts at step 0 whatever an earlier run left in
// memory, and removes it.
TEST(MemoryCheckpointStale, AFreshRunNeverReadsAnEarlierRunsSegment) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("stale");
  const auto crashed = run_cli(
      "run " + job + " --set run_dir=" + run + " --set cluster.env.RM_TEST_FAULT=kill:0:7",
      dir.path());
  ASSERT_NE(crashed.exit_code, 0) << crashed.out;
  ASSERT_TRUE(fs::exists(segment_path(run, 0)));
  const auto r = run_cli("run " + job + " --fresh --set run_dir=" + run, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("resuming"), std::string::npos) << r.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
  EXPECT_FALSE(fs::exists(segment_path(run, 0)));
  // And a directory removed and made again is a new run too.
  const auto crashed2 = run_cli(
      "run " + job + " --set run_dir=" + run + "2 --set cluster.env.RM_TEST_FAULT=kill:0:3",
      dir.path());
  ASSERT_NE(crashed2.exit_code, 0);
  fs::remove_all(run + "2");
  const auto r2 = run_cli("run " + job + " --set run_dir=" + run + "2", dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err << r2.out;
  EXPECT_EQ(r2.out.find("resuming"), std::string::npos) << r2.out;
  EXPECT_FALSE(fs::exists(segment_path(run + "2", 0)));
}

// An attempt without memory checkpoints makes the earlier attempts' segments stale as soon as it
// trains: it removes them, so that a later attempt with them on cannot go back to one (before:
// attempt 3 resumed from attempt 1's step, attempt 2's steps missing from metrics.jsonl). And a
// run that ends removes those of an earlier layout too (here: 3 ranks killed, ended on 2).
TEST(MemoryCheckpointStale, AnAttemptWithoutThemRemovesTheEarlierAttemptsSegments) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("off");
  const std::string at = " --set run_dir=" + run;
  ASSERT_NE(run_cli("run " + job + at + " --set cluster.env.RM_TEST_FAULT=kill:0:7", dir.path())
                .exit_code,
            0);
  ASSERT_TRUE(fs::exists(segment_path(run, 0)));
  const auto off = run_cli("run " + job + at +
                               " --set checkpoint.memory_every=0 --set "
                               "cluster.env.RM_TEST_FAULT=kill:0:6",
                           dir.path());
  ASSERT_NE(off.exit_code, 0);
  EXPECT_NE(off.out.find("removed 1 in-memory checkpoint segment of this run's earlier attempts"),
            std::string::npos)
      << off.out;
  EXPECT_FALSE(fs::exists(segment_path(run, 0)));
  const auto on = run_cli("run " + job + at, dir.path());
  ASSERT_EQ(on.exit_code, 0) << on.err << on.out;
  EXPECT_EQ(on.out.find("resuming from memory"), std::string::npos) << on.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));

  const std::string shrunk = dir.file("shrunk");
  ASSERT_NE(run_cli("run " + job + np(3) + " --set run_dir=" + shrunk +
                        " --set train.global_batch=12 --set cluster.env.RM_TEST_FAULT=kill:0:5",
                    dir.path(), kNoLeakCheck)
                .exit_code,
            0);
  ASSERT_TRUE(fs::exists(segment_path(shrunk, 2)));
  const auto ended =
      run_cli("run " + job + np(2) + " --set run_dir=" + shrunk + " --set train.global_batch=12",
              dir.path());
  ASSERT_EQ(ended.exit_code, 0) << ended.err << ended.out;
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(fs::exists(segment_path(shrunk, r))) << r;
}

// An attempt on another rank count that resumes from the disk removes what memory holds of the
// earlier layout: a later attempt back on that layout, after this one died before its first
// memory save, resumes from the disk too (before: from the first attempt's memory, past the
// metrics.jsonl the second had cut back -- steps 5 and 6 missing from it).
TEST(MemoryCheckpointStale, AnAttemptOnAnotherLayoutRemovesTheEarlierLayoutsSegments) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string at = " --set run_dir=" + dir.file("moved") + " --set train.global_batch=12";
  const std::string moved = dir.file("moved");
  ASSERT_NE(
      run_cli("run " + job + np(2) + at + " --set cluster.env.RM_TEST_FAULT=kill:1:7", dir.path())
          .exit_code,
      0);
  ASSERT_TRUE(fs::exists(segment_path(moved, 1)));
  const auto other =
      run_cli("run " + job + np(3) + at + " --set cluster.env.RM_TEST_FAULT=kill:1:5", dir.path(),
              kNoLeakCheck);
  ASSERT_NE(other.exit_code, 0);
  EXPECT_NE(other.out.find("(step 4)"), std::string::npos) << other.out;
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(fs::exists(segment_path(moved, r))) << r;
  const auto back = run_cli("run " + job + np(2) + at, dir.path());
  ASSERT_EQ(back.exit_code, 0) << back.err << back.out;
  EXPECT_EQ(back.out.find("resuming from memory"), std::string::npos) << back.out;
  EXPECT_TRUE(test::each_step_once(moved + "/metrics.jsonl", 10));
}

// An attempt still set up to salvage an earlier, larger layout (the launcher keeps
// RM_SHRUNK_FROM_RANKS for every attempt after a shrink) finds nothing of it, and keeps what the
// current layout holds: same names, other owner and size. Before, it removed them by name, and
// the run resumed from the disk's step 4 instead of memory's step 6.
TEST(MemoryCheckpointStale, ASalvageOfAnEarlierLayoutKeepsTheCurrentLayoutsSegments) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("salvaged");
  const std::string at = np(2) + " --set run_dir=" + run;
  ASSERT_NE(run_cli("run " + job + at + " --set cluster.env.RM_TEST_FAULT=kill:1:7", dir.path())
                .exit_code,
            0);
  ASSERT_TRUE(fs::exists(segment_path(run, 1)));
  const auto again =
      run_cli("run " + job + at + " --set cluster.env.RM_SHRUNK_FROM_RANKS=3", dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
  EXPECT_NE(again.out.find("resuming from memory (step 6; disk: step 4)"), std::string::npos)
      << again.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 10));
}

// A run that crashed and is never run again leaves its segments; once its directory is gone, the
// next run on the host -- any job, memory checkpoints or not -- removes them, and only them.
TEST(MemoryCheckpointOrphans, ACrashedRunsSegmentsGoOnceItsDirectoryIsGone) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string orphan = dir.file("orphan"), kept = dir.file("kept");
  for (const std::string& run : {orphan, kept}) {
    const auto crashed = run_cli("run " + job + np(2) + " --set run_dir=" + run +
                                     " --set cluster.env.RM_TEST_FAULT=kill:0:5",
                                 dir.path());
    ASSERT_NE(crashed.exit_code, 0) << crashed.out;
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(fs::exists(segment_path(run, r))) << run << " " << r;
  }
  fs::remove_all(orphan);
  const auto other = run_cli("run " + job + " --set run_dir=" + dir.file("other") +
                                 " --set checkpoint.memory_every=0 --set train.steps=2",
                             dir.path());
  ASSERT_EQ(other.exit_code, 0) << other.err << other.out;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(fs::exists(segment_path(orphan, r))) << "an orphan left: rank " << r;
    EXPECT_TRUE(fs::exists(segment_path(kept, r))) << "a live directory's segment removed";
  }
  // The line names what went -- unless a test running beside this one swept it first.
  if (other.out.find("of runs whose directory is gone") != std::string::npos) {
    EXPECT_NE(other.out.find("removed 2 in-memory checkpoint segments of runs whose directory is "
                             "gone, from /dev/shm: "),
              std::string::npos)
        << other.out;
    EXPECT_NE(other.out.find(" (" + orphan + ")"), std::string::npos) << other.out;
  }
  const auto resumed = run_cli("run " + job + np(2) + " --set run_dir=" + kept, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_NE(resumed.out.find("resuming from memory (step 4; disk: step 4)"), std::string::npos)
      << resumed.out;
  for (int r = 0; r < 2; ++r) EXPECT_FALSE(fs::exists(segment_path(kept, r)));
}

}  // namespace
}  // namespace rm

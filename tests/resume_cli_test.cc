// Resume through the real binary: a run killed mid-way and started again continues from its
// newest verified checkpoint, bit for bit at the same world size, and within floating-point
// tolerance on another number of ranks in another shard mode.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

// extra_model: more keys of the model's map (", dropout: 0.2").
std::string job_file(const TempDir& dir, const std::string& extra_model = "") {
  return dir.write("job.yaml", R"(name: resume
run_dir: )" + dir.file("straight") +
                                   R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32)" +
                                   extra_model +
                                   R"(}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 2, async: true}
)");
}

class KilledRun : public ::testing::TestWithParam<const char*> {};

// Also with model.dropout: the masks after the resume are those the straight run drew (keyed by
// the sample, not by a generator's state that a restart would lose).
TEST_P(KilledRun, ResumesBitForBit) {
  TempDir dir;
  const std::string job = job_file(dir, GetParam());
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string b = " --set run_dir=" + dir.file("killed");
  // Synchronous saves in the run that is killed, so that step 4's checkpoint is surely
  // committed before the kill at step 7, however loaded the machine (async saves are covered
  // by checkpoint/async_writer_test.cc); the resumed run saves asynchronously again.
  const auto killed = run_cli("run " + job + b + " --set checkpoint.async=false", dir.path(),
                              "RM_TEST_FAULT=kill:0:7");
  EXPECT_NE(killed.exit_code, 0);
  const auto resumed = run_cli("run " + job + b, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  EXPECT_EQ(test::slurp(dir.file("straight/weights.bin")),
            test::slurp(dir.file("killed/weights.bin")))
      << "parameters after resume differ from the uninterrupted run";
  EXPECT_TRUE(test::each_step_once(dir.file("killed/metrics.jsonl"), 12));
  EXPECT_EQ(test::losses_by_step(dir.file("straight/metrics.jsonl")),
            test::losses_by_step(dir.file("killed/metrics.jsonl")));
}

INSTANTIATE_TEST_SUITE_P(ResumeCli, KilledRun, ::testing::Values("", ", dropout: 0.2"),
                         [](const auto& info) {
                           return std::string(info.param[0] == '\0' ? "Plain" : "WithDropout");
                         });

TEST(ResumeCli, TwoRanksZero1ResumeOnOneRankFullySharded) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string b = " --set run_dir=" + dir.file("moved");
  const auto killed = run_cli(
      "run " + job + b + " --nproc 2 --set parallel.shard=optimizer --set checkpoint.async=false",
      dir.path(), "RM_TEST_FAULT=kill:1:7");
  EXPECT_NE(killed.exit_code, 0);
  const auto resumed = run_cli("run " + job + b + " --set parallel.shard=full", dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  const auto a = test::losses_by_step(dir.file("straight/metrics.jsonl"));
  const auto m = test::losses_by_step(dir.file("moved/metrics.jsonl"));
  EXPECT_TRUE(test::each_step_once(dir.file("moved/metrics.jsonl"), 12));
  ASSERT_EQ(m.size(), 12u);
  for (const auto& [step, loss] : a) EXPECT_NEAR(m.at(step), loss, 1e-5 * loss) << step;
}

// A run may be resumed with another train.steps. Under optimizer.schedule wsd the learning rate
// before the decay does not depend on train.steps, so a run of 8 steps killed before its decay
// (from step 6) and resumed with 16 ends with the weights and losses of 16 steps straight.
TEST(ResumeCli, AWsdRunExtendedBeforeItsDecayIsTheLongerRunBitForBit) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string wsd =
      " --set optimizer.schedule=wsd --set optimizer.decay_fraction=0.25 --set "
      "optimizer.warmup_steps=2 --set train.steps=16";
  ASSERT_EQ(run_cli("run " + job + wsd, dir.path()).exit_code, 0);
  const std::string b = " --set run_dir=" + dir.file("extended");
  const auto killed =
      run_cli("run " + job + wsd + b + " --set train.steps=8 --set checkpoint.async=false",
              dir.path(), "RM_TEST_FAULT=kill:0:6");
  EXPECT_NE(killed.exit_code, 0);
  const auto extended = run_cli("run " + job + wsd + b, dir.path());
  ASSERT_EQ(extended.exit_code, 0) << extended.err;
  EXPECT_NE(extended.out.find("train.steps is 16, where the run in this directory had 8: it goes "
                              "on to step 16 from the checkpoint it resumes from; "
                              "optimizer.schedule wsd"),
            std::string::npos)
      << extended.out;
  // 8 steps decayed over their last 2, 16 over their last 4 (steps 14 to 16).
  EXPECT_NE(extended.out.find("the learning rate stays at optimizer.lr through step 13 (it did "
                              "through step 7), so from a checkpoint at or before step 7 the run "
                              "goes on as if it had been this long from the start"),
            std::string::npos)
      << extended.out;
  EXPECT_NE(extended.out.find("step_00000004 (step 4)"), std::string::npos) << extended.out;
  EXPECT_EQ(test::slurp(dir.file("straight/weights.bin")),
            test::slurp(dir.file("extended/weights.bin")));
  EXPECT_EQ(test::losses_by_step(dir.file("straight/metrics.jsonl")),
            test::losses_by_step(dir.file("extended/metrics.jsonl")));
}

// Cut short: a run of 16 steps killed at 10 (its checkpoint: 8) and resumed with 12 trains steps
// 9 to 12 and ends there, each step logged once, and says so.
TEST(ResumeCli, ARunCutShortOnResumeEndsAtItsNewLastStep) {
  TempDir dir;
  const std::string job = job_file(dir);
  const auto killed = run_cli("run " + job + " --set train.steps=16 --set checkpoint.async=false",
                              dir.path(), "RM_TEST_FAULT=kill:0:10");
  EXPECT_NE(killed.exit_code, 0);
  const auto shorter = run_cli("run " + job + " --set train.steps=12", dir.path());
  ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
  EXPECT_NE(shorter.out.find("train.steps is 12, where the run in this directory had 16: it "
                             "trains no step past 12"),
            std::string::npos)
      << shorter.out;
  EXPECT_NE(shorter.out.find("step_00000008 (step 8)"), std::string::npos) << shorter.out;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 12));
  EXPECT_EQ(test::losses_by_step(dir.file("straight/metrics.jsonl")).rbegin()->first, 12);
}

// A save of a step already committed, on a file system without RENAME_EXCHANGE (NFS), moves the
// old step_N aside (step_N.replaced.tmp) and then step_N.tmp in: a crash between the two left no
// step_N, and the next start took the old one for scratch -- the resume passed it over for an
// older checkpoint, and both copies were removed. The state that crash leaves, made by hand:
// the next start puts the old one back and resumes from it.
TEST(ResumeCli, AReplaceCutShortBetweenItsRenamesPutsTheOldCheckpointBack) {
  TempDir dir;
  const std::string job = job_file(dir);
  const auto killed = run_cli("run " + job + " --set checkpoint.async=false", dir.path(),
                              "RM_TEST_FAULT=kill:0:10");
  EXPECT_NE(killed.exit_code, 0);
  const std::string root = dir.file("straight/checkpoints");
  ASSERT_TRUE(std::filesystem::exists(root + "/step_00000008"));
  std::filesystem::copy(root + "/step_00000008", root + "/step_00000008.tmp",
                        std::filesystem::copy_options::recursive);
  std::filesystem::rename(root + "/step_00000008", root + "/step_00000008.replaced.tmp");
  const auto again = run_cli("run " + job, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find(root + "/step_00000008: put back, moved aside by a save of its step"),
            std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("step_00000008 (step 8)"), std::string::npos) << again.out;
  EXPECT_FALSE(std::filesystem::exists(root + "/step_00000008.replaced.tmp"));
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 12));
}

// A finished run extended is unfinished again: its weights.bin (the old end's) goes as the run
// starts, so that eval of the run directory reads the newest checkpoint while it trains, not the
// old end's weights (before: the 12-step weights, silently, while checkpoints of step 16 were
// there). It comes back when the run ends.
TEST(ResumeCli, AFinishedRunExtendedReadsAsItsNewestCheckpointUntilItEnds) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  const std::string eval = " --data data/tinyshakespeare.txt --max-tokens 2048";
  const auto old_end = run_cli("eval " + run + eval, dir.path());
  ASSERT_EQ(old_end.exit_code, 0) << old_end.err;
  const auto killed = run_cli("run " + job + " --set train.steps=20 --set checkpoint.async=false",
                              dir.path(), "RM_TEST_FAULT=kill:0:18");
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_NE(killed.out.find("weights.bin, of the run's end at step 12, is removed until it ends "
                            "again"),
            std::string::npos)
      << killed.out;
  EXPECT_FALSE(std::filesystem::exists(run + "/weights.bin"));
  const auto unfinished = run_cli("eval " + run + eval, dir.path());
  ASSERT_EQ(unfinished.exit_code, 0) << unfinished.err;
  EXPECT_NE(unfinished.err.find("step_00000016"), std::string::npos) << unfinished.err;
  const auto newest = run_cli("eval " + run + "/checkpoints/step_00000016" + eval, dir.path());
  EXPECT_EQ(unfinished.out, newest.out);
  EXPECT_NE(unfinished.out, old_end.out);
  ASSERT_EQ(run_cli("run " + job + " --set train.steps=20", dir.path()).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(run + "/weights.bin"));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 20));
}

// --fresh leaves nothing of the old run that status, report or trace would show as the new
// one's: its events (with their checkpoints and "finished"), logs and traces.
TEST(ResumeCli, FreshLeavesNothingOfTheOldRun) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job + " --set observability.trace=true", dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  ASSERT_EQ(run_cli("trace " + run, dir.path()).exit_code, 0);
  ASSERT_EQ(run_cli("report " + run, dir.path()).exit_code, 0);
  for (const char* name : {"events.jsonl", "trace", "trace.json", "report.html", "logs"}) {
    ASSERT_TRUE(std::filesystem::exists(run + "/" + name)) << name;
  }
  const auto fresh =
      run_cli("run " + job + " --fresh --set train.steps=8 --set checkpoint.every=0", dir.path());
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  for (const char* name : {"trace", "trace.json", "report.html"}) {
    EXPECT_FALSE(std::filesystem::exists(run + "/" + name)) << name;
  }
  const std::string events = test::slurp(run + "/events.jsonl");
  EXPECT_EQ(events.find("step_00000004"), std::string::npos) << events;
  EXPECT_EQ(events.find("\"step\":12"), std::string::npos) << events;
  EXPECT_NE(events.find("\"step\":8"), std::string::npos) << events;
  const auto status = run_cli("status " + run, dir.path());
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out.find("step_00000004"), std::string::npos) << status.out;
}

// Two ranks verify the checkpoint a resume takes together, each its share of the bytes
// (worker/shared_verification.h), instead of rank 0 reading all of it while the other waits in
// a collective under parallel.timeout_s. Damage in rank 1's share is found by rank 1, said in
// rank 1's words, and the older checkpoint is taken.
TEST(ResumeCli, TwoRanksVerifyTheCheckpointTogether) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("straight");
  const auto killed = run_cli("run " + job + " --nproc 2 --set checkpoint.async=false", dir.path(),
                              "RM_TEST_FAULT=kill:0:11");
  EXPECT_NE(killed.exit_code, 0);
  // The last bytes of rank 1's shard: its adam_v, the end of the bytes laid end to end, which
  // the second of two shares verifies.
  const std::string bad = run + "/checkpoints/step_00000008/shard_00001.bin";
  const auto size = std::filesystem::file_size(bad);
  std::fstream(bad, std::ios::in | std::ios::out | std::ios::binary)
      .seekp(static_cast<std::streamoff>(size - 8))
      .write("garbage!", 8);
  uint64_t checkpoint_bytes = 0;  // of step 4's, which the resume takes (retention removes it)
  for (const auto& e : std::filesystem::directory_iterator(run + "/checkpoints/step_00000004")) {
    if (e.path().filename().string().rfind("shard_", 0) == 0) checkpoint_bytes += e.file_size();
  }
  ASSERT_GT(checkpoint_bytes, 0u);
  const auto resumed = run_cli("run " + job + " --nproc 2", dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("skipped " + run + "/checkpoints/step_00000008: " + bad +
                             ": checksum mismatch in piece adam_v"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("(the file is corrupted) (found by rank 1)"), std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("step_00000004 (step 4)"), std::string::npos) << resumed.out;
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));

  std::ifstream events(run + "/events.jsonl");
  int resumes = 0;
  for (std::string line; std::getline(events, line);) {
    const auto e = nlohmann::json::parse(line);
    if (e.value("event", "") != "resumed") continue;
    ++resumes;
    ASSERT_TRUE(e.contains("verify")) << line;
    EXPECT_EQ(e["verify"]["ranks"], 2) << line;
    const auto share = e["verify"]["largest_share_bytes"].get<uint64_t>();
    EXPECT_GT(share, 0u) << line;
    EXPECT_LT(share, checkpoint_bytes * 3 / 4) << "one rank read most of it: " << line;
  }
  EXPECT_EQ(resumes, 1);
}

// A worker started without `run` (a batch script's srun, a Slurm requeue, a supervisor's restart)
// judges a finished run by its checkpoints' structure before it writes, and reads them with
// every rank as it resumes: rank 0 no longer reads them alone first, while the others wait for
// it under the start-up timeout. Damage inside the end's checkpoint is found by the rank whose
// share holds it, and the run is refused, weights.bin and the checkpoints kept.
TEST(ResumeCli, AWorkerReadsAFinishedRunsCheckpointWithEveryRank) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string run = dir.file("straight");
  ASSERT_EQ(run_cli("run " + job + " --nproc 2", dir.path()).exit_code, 0);
  const std::string weights = test::slurp(run + "/weights.bin");
  const std::string bad = run + "/checkpoints/step_00000012/shard_00001.bin";
  const auto size = std::filesystem::file_size(bad);
  std::fstream(bad, std::ios::in | std::ios::out | std::ios::binary)
      .seekp(static_cast<std::streamoff>(size - 8))
      .write("garbage!", 8);
  // Open MPI session directories of the test's own (CMakeLists.txt, rm_own_mpi_sessions says why).
  const auto again = run_cli(
      "worker " + job + " --set train.steps=16", dir.path(), "",
      "mpirun -np 2 --oversubscribe --allow-run-as-root --mca orte_tmpdir_base " + dir.path());
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("holds a finished run whose end (weights.bin) is newer than its "
                           "newest checkpoint that verifies (step 8;"),
            std::string::npos)
      << again.err;
  EXPECT_NE(again.out.find("skipped " + run + "/checkpoints/step_00000012: " + bad +
                           ": checksum mismatch"),
            std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("(found by rank 1)"), std::string::npos) << again.out;
  EXPECT_TRUE(test::slurp(run + "/weights.bin") == weights) << "weights.bin changed";
  EXPECT_TRUE(std::filesystem::exists(bad));
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
}

// A finished run none of whose checkpoints verifies is refused as one without checkpoints is
// (before: trained again from step 0, metrics.jsonl cut, beside the old weights.bin).
TEST(ResumeCli, AFinishedRunWithNoCheckpointThatVerifiesIsRefused) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  const std::string weights = test::slurp(run + "/weights.bin");
  for (const auto& e : std::filesystem::directory_iterator(run + "/checkpoints")) {
    std::ofstream(e.path() / "shard_00000.bin", std::ios::in | std::ios::out | std::ios::binary)
        .write("garbage!", 8);
  }
  const std::string config = test::slurp(run + "/config.yaml");
  const std::string events = test::slurp(run + "/events.jsonl");
  const auto again = run_cli("run " + job + " --set train.steps=16", dir.path());
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("holds a finished run (weights.bin) none of whose checkpoints verifies"),
            std::string::npos)
      << again.err;
  // Refused before the run directory is touched: before config.yaml.
  EXPECT_EQ(test::slurp(run + "/config.yaml"), config) << "config.yaml rewritten (steps 16)";
  EXPECT_EQ(test::slurp(run + "/events.jsonl"), events);
  EXPECT_EQ(test::slurp(run + "/weights.bin"), weights);
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
}

// A finished run extended whose end's checkpoint is damaged: weights.bin is the only copy of
// that end. Refused, weights.bin and metrics.jsonl as they were (before: weights.bin removed, and
// the run trained on from step 8 under the new schedule to another end). With weights.bin moved
// out, it goes on from step 8.
TEST(ResumeCli, AFinishedRunWhoseEndsCheckpointIsDamagedKeepsItsWeights) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  const std::string weights = test::slurp(run + "/weights.bin");
  std::ofstream(run + "/checkpoints/step_00000012/shard_00000.bin",
                std::ios::in | std::ios::out | std::ios::binary)
      .write("garbage!", 8);
  const std::string config = test::slurp(run + "/config.yaml");
  const std::string events = test::slurp(run + "/events.jsonl");
  const auto again = run_cli("run " + job + " --set train.steps=16 --nproc 2", dir.path());
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("holds a finished run whose end (weights.bin) is newer than its "
                           "newest checkpoint that verifies"),
            std::string::npos)
      << again.err;
  // Said once, before any rank started, and nothing of the run rewritten: before, config.yaml
  // said steps 16, events.jsonl had a "resumed", and each of the ranks refused.
  EXPECT_EQ(again.err.find("[rank "), std::string::npos) << again.err;
  EXPECT_EQ(test::slurp(run + "/config.yaml"), config) << "config.yaml rewritten (steps 16)";
  EXPECT_EQ(test::slurp(run + "/events.jsonl"), events);
  EXPECT_NE(again.err.find("(step 8; above, why"), std::string::npos) << again.err;
  EXPECT_NE(again.out.find("skipped " + run + "/checkpoints/step_00000012"), std::string::npos)
      << again.out;
  EXPECT_TRUE(test::slurp(run + "/weights.bin") == weights) << "weights.bin changed";
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 12));
  std::filesystem::rename(run + "/weights.bin", dir.file("end.bin"));
  const auto goes_on = run_cli("run " + job + " --set train.steps=16", dir.path());
  ASSERT_EQ(goes_on.exit_code, 0) << goes_on.err;
  EXPECT_NE(goes_on.out.find("step_00000008 (step 8)"), std::string::npos) << goes_on.out;
  EXPECT_TRUE(std::filesystem::exists(run + "/weights.bin"));
}

// The same when the newest checkpoint that verifies was itself an end, an earlier one: finished
// at 12, extended to 16 (its end now in weights.bin), step 16's checkpoint damaged. Step 12's
// manifest says it ended its job, yet weights.bin holds step 16 (before: accepted as the end,
// weights.bin removed, "of the run's end at step 12").
TEST(ResumeCli, AnEarlierEndIsNotTheEndWeightsBinHolds) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  ASSERT_EQ(run_cli("run " + job + " --set train.steps=16", dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  const std::string weights = test::slurp(run + "/weights.bin");
  std::ofstream(run + "/checkpoints/step_00000016/shard_00000.bin",
                std::ios::in | std::ios::out | std::ios::binary)
      .write("garbage!", 8);
  const auto again = run_cli("run " + job + " --set train.steps=20", dir.path());
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("holds a finished run whose end (weights.bin) is newer than its "
                           "newest checkpoint that verifies (step 12;"),
            std::string::npos)
      << again.err;
  EXPECT_TRUE(test::slurp(run + "/weights.bin") == weights) << "weights.bin changed";
  EXPECT_TRUE(test::each_step_once(run + "/metrics.jsonl", 16));
}

// A write of the run's own file cut short (a rank killed as it wrote the final weights) left
// weights.bin.tmp.PID, the model's size, for ever: the next start removes it, and only names of
// ours.
TEST(ResumeCli, AWriteCutShortIsRemovedAtTheNextStart) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  for (const char* name : {"weights.bin.tmp.16610", "notes.tmp.1", "weights.bin.tmp.x"}) {
    std::ofstream(run + "/" + name) << "leftover";
  }
  const auto again = run_cli("run " + job + " --set train.steps=14", dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("removed weights.bin.tmp.16610, a write of weights.bin cut short"),
            std::string::npos)
      << again.out;
  EXPECT_FALSE(std::filesystem::exists(run + "/weights.bin.tmp.16610"));
  EXPECT_TRUE(std::filesystem::exists(run + "/notes.tmp.1"));
  EXPECT_TRUE(std::filesystem::exists(run + "/weights.bin.tmp.x"));
}

// The training data replaced at the same path by a file of another size: the data order would
// go on differently from the checkpoint, silently (before: resumed, exit 0). Refused, naming it.
TEST(ResumeCli, DataChangedSinceTheCheckpointIsRefused) {
  TempDir dir;
  const std::string text = test::slurp("data/tinyshakespeare.txt");
  dir.write("data.txt", text);
  const std::string job = job_file(dir) + " --set data.train=" + dir.file("data.txt");
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  dir.write("data.txt", text.substr(0, text.size() / 2));
  const auto r = run_cli("run " + job + " --set train.steps=16", dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("the data changed since"), std::string::npos) << r.err;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 12));
}

// The same at the same size: the file's first line edited, or its lines in another order: the
// window count holds, the tokens do not (before: resumed on other tokens, exit 0). Refused by
// the fingerprint the checkpoint records; the data put back, the run goes on.
TEST(ResumeCli, DataOfTheSameSizeButOtherTokensIsRefused) {
  TempDir dir;
  const std::string text = test::slurp("data/tinyshakespeare.txt");
  dir.write("data.txt", text);
  const std::string job = job_file(dir) + " --set data.train=" + dir.file("data.txt");
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  std::string edited = text;
  edited[0] = edited[0] == 'X' ? 'Y' : 'X';
  dir.write("data.txt", edited);
  const auto r = run_cli("run " + job + " --set train.steps=16", dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("training windows the checkpoint resumed from was trained on, but other "
                       "tokens"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 12));
  dir.write("data.txt", text);
  const auto back = run_cli("run " + job + " --set train.steps=16", dir.path());
  EXPECT_EQ(back.exit_code, 0) << back.err;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 16));
}

// The validation data changed under a run with checkpoint.keep_best: refused, naming it, since
// the best checkpoint is chosen by validation losses that would no longer compare (before: the
// run went on and took a loss on other windows for a new best). Without keep_best it goes on,
// with a note that losses from there on do not compare.
TEST(ResumeCli, ValidationDataChangedUnderKeepBestIsRefused) {
  TempDir dir;
  const std::string text = test::slurp("data/tinyshakespeare.txt");
  const std::string val = text.substr(100000, 40000);
  dir.write("val.txt", val);
  const std::string job = job_file(dir) + " --set data.val=" + dir.file("val.txt") +
                          " --set train.eval_every=4 --set train.eval_batches=2" +
                          " --set checkpoint.keep_best=true";
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  std::string edited = val;
  edited[edited.size() - 2] = edited[edited.size() - 2] == 'X' ? 'Y' : 'X';
  dir.write("val.txt", edited);
  const auto r = run_cli("run " + job + " --set train.steps=16", dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("the validation data (data.val, or the last data.val_fraction of "
                       "data.train) holds"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("set checkpoint.keep_best: false"), std::string::npos) << r.err;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 12));
  const auto noted =
      run_cli("run " + job + " --set train.steps=16 --set checkpoint.keep_best=false", dir.path());
  EXPECT_EQ(noted.exit_code, 0) << noted.err << noted.out;
  EXPECT_NE(noted.out.find("validation losses from here on do not compare with earlier ones"),
            std::string::npos)
      << noted.out;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 16));
}

TEST(ResumeCli, ADifferentJobNeedsFresh) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const auto r = run_cli("run " + job + " --set model.width=64", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("different job"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("differs: model.width: 32 -> 64)"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli("run " + job + " --set model.width=64 --fresh", dir.path()).exit_code, 0);
  // Another validation set (train.eval_batches x micro_batch windows), named with what keeps it.
  const auto other_set = run_cli("run " + job + " --set train.eval_batches=3", dir.path());
  EXPECT_EQ(other_set.exit_code, 2);
  EXPECT_NE(other_set.err.find("windows: 8 x 2 = 16 -> 3 x 2 = 6 (train.eval_batches 8 keeps it)"),
            std::string::npos)
      << other_set.err;
  // Where the eval_batches that would keep it passes its bound, that is said instead of a value
  // the schema refuses (nothing is evaluated: eval_every 0).
  const std::string big = " --set run_dir=" + dir.file("big") + " --set train.eval_batches=1000000";
  ASSERT_EQ(run_cli("run " + job + big + " --set train.steps=1", dir.path()).exit_code, 0);
  const auto over = run_cli("run " + job + big + " --set train.micro_batch=1", dir.path());
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_NE(over.err.find("(train.eval_batches would have to be 2000000, over its bound of "
                          "1000000; a larger micro_batch that divides 2000000 would keep it)"),
            std::string::npos)
      << over.err;
}

// What the memory check and the planner suggest when a job does not fit (model.recompute,
// model.classifier_chunk_tokens) resumes the run: both were refused as "a different job", so a
// run could only take the advice with --fresh, losing its steps. Recompute computes the same
// activations again, so that resume is bit for bit the straight run; smaller classifier chunks
// sum the head's gradient in another order (as another micro_batch does), so within tolerance.
TEST(ResumeCli, WhatTheMemoryCheckSuggestsResumesTheRun) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string recomputed = " --set run_dir=" + dir.file("recomputed");
  ASSERT_EQ(run_cli("run " + job + recomputed + " --set train.steps=4", dir.path()).exit_code, 0);
  const auto r = run_cli("run " + job + recomputed + " --set model.recompute=true", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(step 4)"), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(dir.file("straight/weights.bin")),
            test::slurp(dir.file("recomputed/weights.bin")))
      << "a resume under model.recompute differs from the straight run";
  EXPECT_EQ(test::losses_by_step(dir.file("straight/metrics.jsonl")),
            test::losses_by_step(dir.file("recomputed/metrics.jsonl")));

  const std::string chunked = " --set run_dir=" + dir.file("chunked");
  ASSERT_EQ(run_cli("run " + job + chunked + " --set train.steps=4", dir.path()).exit_code, 0);
  const auto c =
      run_cli("run " + job + chunked + " --set model.classifier_chunk_tokens=16", dir.path());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("(step 4)"), std::string::npos) << c.out;
  EXPECT_TRUE(test::each_step_once(dir.file("chunked/metrics.jsonl"), 12));
  const auto straight = test::losses_by_step(dir.file("straight/metrics.jsonl"));
  const auto resumed = test::losses_by_step(dir.file("chunked/metrics.jsonl"));
  ASSERT_EQ(straight.size(), resumed.size());
  for (const auto& [step, loss] : straight) {
    ASSERT_TRUE(resumed.count(step)) << step;
    EXPECT_NEAR(resumed.at(step), loss, 1e-3 * loss) << "step " << step;
  }
  // What the model is stays compared: another width is still another job.
  const auto other = run_cli("run " + job + chunked + " --set model.width=64", dir.path());
  EXPECT_EQ(other.exit_code, 2) << other.err;
}

// Without validation data (val_fraction 0) there is no validation set to keep: another
// micro_batch resumes whatever train.eval_batches says.
TEST(ResumeCli, WithoutValidationDataAnotherMicroBatchResumes) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string none = " --set data.val_fraction=0";
  ASSERT_EQ(run_cli("run " + job + none + " --set train.steps=4", dir.path()).exit_code, 0);
  const auto r = run_cli("run " + job + none + " --set train.micro_batch=4", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(step 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train.micro_batch is 4, where the run in this directory had 2"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(test::each_step_once(dir.file("straight/metrics.jsonl"), 12));
}

// Without config.yaml (removed, or only the checkpoints copied) the checkpoints' own record of
// the job is compared: another model was accepted, failed as the ranks restored (exit 1), and
// config.yaml was rewritten to the other job's.
TEST(ResumeCli, ADifferentJobIsToldFromTheCheckpointsWithoutConfigYaml) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job + " --set train.steps=8", dir.path()).exit_code, 0);
  const std::string run = dir.file("straight");
  std::filesystem::remove(run + "/config.yaml");
  const auto r = run_cli("run " + job + " --set model.width=64", dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("manifest.json differs: model.width: 32 -> 64)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(run + "/config.yaml"));
  const auto same = run_cli("run " + job, dir.path());
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("(step 8)"), std::string::npos) << same.out;
}

// A run that dies before its first checkpoint leaves only its partial metrics.jsonl: running
// the same job again (by hand, a restart or a Slurm requeue) starts it again from step 0.
TEST(ResumeCli, RunKilledBeforeItsFirstCheckpointStartsAgain) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string b = " --set run_dir=" + dir.file("early");
  const auto killed = run_cli("run " + job + b, dir.path(), "RM_TEST_FAULT=kill:0:3");
  EXPECT_NE(killed.exit_code, 0);
  ASSERT_FALSE(test::losses_by_step(dir.file("early/metrics.jsonl")).empty());
  const auto again = run_cli("run " + job + b, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("starting it again from step 0"), std::string::npos) << again.out;
  EXPECT_EQ(test::slurp(dir.file("straight/weights.bin")),
            test::slurp(dir.file("early/weights.bin")));
  EXPECT_TRUE(test::each_step_once(dir.file("early/metrics.jsonl"), 12));
  EXPECT_EQ(test::losses_by_step(dir.file("straight/metrics.jsonl")),
            test::losses_by_step(dir.file("early/metrics.jsonl")));
  // Still refused: another job in that directory, and a finished run without checkpoints.
  const auto other = run_cli("run " + job + b + " --set model.width=64", dir.path());
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("different job"), std::string::npos) << other.err;
  std::filesystem::remove_all(dir.file("early/checkpoints"));
  const auto finished = run_cli("run " + job + b, dir.path());
  EXPECT_EQ(finished.exit_code, 2);
  EXPECT_NE(finished.err.find("finished run (weights.bin)"), std::string::npos) << finished.err;
}

}  // namespace
}  // namespace rm

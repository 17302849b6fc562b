// Resharding through the real binary: a job run on N ranks in one shard mode, killed, resumes on
// M ranks in another shard mode, continuing the same global sample sequence: every step's loss
// and the final weights match an uninterrupted N-rank run within floating-point tolerance (the
// rank count changes the order in which gradients are summed, so not bit for bit). The same
// with another train.micro_batch, whose validation set must stay.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/weights_file.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

// One thread per rank, so that 4 ranks on a 2-core machine do not oversubscribe it further; a
// hang is a failure, not a stuck ctest (a run takes a few seconds). Under ASan (CI's sanitize
// stage), no leak check at the ranks' exit: with 4 ranks on 2 loaded cores LeakSanitizer's own
// tracer died of SIGSEGV ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal
// error") in two CI runs, failing the run without a leak; ASan's checks of memory errors stay,
// and the same code's leaks are checked by the resume tests' 1- and 2-rank runs.
const std::string kEnv =
    "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" OMP_NUM_THREADS=1 timeout -k 5 180";

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: reshard
run_dir: )" + dir.file("straight") +
                                   R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 2, async: true}
parallel: {threads_per_rank: 1, timeout_s: 60}
)");
}

// weights.bin, checked (magic, size, checksum) by load_weights; the count is read from the
// header (weights_file.h: magic, uint64 count, ...).
std::vector<float> weights(const std::string& path) {
  const std::string bytes = test::slurp(path);
  uint64_t count = 0;
  if (bytes.size() >= 16) std::memcpy(&count, bytes.data() + 8, sizeof count);
  return load_weights(path, count);
}

struct Move {
  int from_ranks;
  const char* from_shard;
  int to_ranks;
  const char* to_shard;
};

std::string name_of(const testing::TestParamInfo<Move>& info) {
  const Move& m = info.param;
  return std::to_string(m.from_ranks) + "x" + m.from_shard + "_to_" + std::to_string(m.to_ranks) +
         "x" + m.to_shard;
}

void PrintTo(const Move& m, std::ostream* os) {
  *os << m.from_ranks << " ranks " << m.from_shard << " -> " << m.to_ranks << " ranks "
      << m.to_shard;
}

// Every step's loss and the final weights of the run in `run_dir` (12 steps) against the
// uninterrupted run in `straight`.
void expect_the_same_training(const std::string& straight, const std::string& run_dir) {
  // Losses: 1e-5 relative, as resume_cli_test and multirank_cli_test allow between rank counts
  // (float32 sums in another order; a loss near 5.5 is summed over 256 targets per step).
  const auto want = test::losses_by_step(straight + "/metrics.jsonl");
  const auto got = test::losses_by_step(run_dir + "/metrics.jsonl");
  ASSERT_EQ(want.size(), 12u);
  ASSERT_EQ(got.size(), 12u);
  EXPECT_TRUE(test::each_step_once(run_dir + "/metrics.jsonl", 12));
  for (const auto& [step, loss] : want)
    EXPECT_NEAR(got.at(step), loss, 1e-5 * loss) << "step " << step;

  // Final weights, element by element: 1e-5 relative, and 1e-6 absolute for weights near zero
  // (where the relative error of rounding noise is unbounded). Adam divides by sqrt(v), so a
  // parameter whose gradient is near zero could move by up to the learning rate (at most
  // 1.2e-4 in these 12 warm-up steps) on rounding noise; measured differences are <= 4e-8.
  const std::vector<float> a = weights(straight + "/weights.bin");
  const std::vector<float> b = weights(run_dir + "/weights.bin");
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  size_t worst_at = 0, bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (diff > worst) {
      worst = diff;
      worst_at = i;
    }
    if (diff > 1e-6 + 1e-5 * std::fabs(a[i])) ++bad;
  }
  std::printf("largest weight difference %.3g at %zu (%.6g vs %.6g)\n", worst, worst_at,
              a[worst_at], b[worst_at]);
  EXPECT_EQ(bad, 0u) << bad << " weights differ by more than 1e-6 + 1e-5 |w|; largest difference "
                     << worst << " at element " << worst_at << " (" << a[worst_at] << " vs "
                     << b[worst_at] << ")";
}

class ReshardCli : public testing::TestWithParam<Move> {};

TEST_P(ReshardCli, KilledRunResumesOnOtherRanksInAnotherShardMode) {
  const Move mv = GetParam();
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string from = "run " + job + " --nproc " + std::to_string(mv.from_ranks) +
                           " --set parallel.shard=" + mv.from_shard;
  const auto straight = run_cli(from, dir.path(), kEnv);
  ASSERT_EQ(straight.exit_code, 0) << straight.err << straight.out;

  // Synchronous saves in the run that is killed, so that step 4's checkpoint is surely
  // committed before the kill at step 7 (as in resume_cli_test); the resumed run saves
  // asynchronously again.
  const std::string run_dir = dir.file("moved");
  const auto killed = run_cli(from + " --set run_dir=" + run_dir + " --set checkpoint.async=false",
                              dir.path(), "RM_TEST_FAULT=kill:0:7 " + kEnv);
  ASSERT_NE(killed.exit_code, 0) << killed.err << killed.out;
  const Manifest written = load_manifest(checkpoint_path(run_dir, 4));
  EXPECT_EQ(written.world_size, mv.from_ranks);
  EXPECT_EQ(written.shard_mode, mv.from_shard);

  const auto resumed =
      run_cli("run " + job + " --set run_dir=" + run_dir + " --nproc " +
                  std::to_string(mv.to_ranks) + " --set parallel.shard=" + mv.to_shard,
              dir.path(), kEnv);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_NE(resumed.out.find("resuming from " + checkpoint_path(run_dir, 4) + " (step 4)"),
            std::string::npos)
      << resumed.out;
  const std::string ranks = std::to_string(mv.to_ranks) + (mv.to_ranks == 1 ? " rank " : " ranks ");
  EXPECT_NE(resumed.out.find(ranks), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("shard " + std::string(mv.to_shard)), std::string::npos)
      << resumed.out;

  expect_the_same_training(dir.file("straight"), run_dir);
}

INSTANTIATE_TEST_SUITE_P(Moves, ReshardCli,
                         testing::Values(Move{4, "none", 2, "gradients"},
                                         Move{2, "full", 4, "optimizer"},
                                         Move{2, "gradients", 1, "none"},
                                         Move{1, "none", 1, "full"}),
                         name_of);

// Another micro-batch on resume: a step's samples do not depend on it, so the run goes on as
// on another rank count, within tolerance. Its validation set, eval_batches x micro_batch
// windows, must stay: a resume that would change it is refused, naming the eval_batches that
// keeps it, and nothing of the run is touched.
TEST(ReshardMicroBatch, AKilledRunResumesWithAnotherMicroBatchWhenItsValidationSetStays) {
  TempDir dir;
  const std::string job = job_file(dir);
  // 1 rank of 2 sequences (4 accumulation steps), validation every 4 steps over 2 x 2 windows.
  const std::string from = "run " + job + " --nproc 1 --set train.eval_every=4";
  const auto straight = run_cli(from + " --set train.eval_batches=2", dir.path(), kEnv);
  ASSERT_EQ(straight.exit_code, 0) << straight.err << straight.out;
  const std::string run_dir = dir.file("moved");
  const auto killed = run_cli(from + " --set train.eval_batches=2 --set run_dir=" + run_dir +
                                  " --set checkpoint.async=false",
                              dir.path(), "RM_TEST_FAULT=kill:0:7 " + kEnv);
  ASSERT_NE(killed.exit_code, 0) << killed.err << killed.out;
  const std::string config = test::slurp(run_dir + "/config.yaml");

  // 2 ranks of 4 sequences (no accumulation): the job file's eval_batches would make it 8
  // windows, and micro_batch 8 (on 1 rank) keeps no 4.
  const std::string to = "run " + job + " --set run_dir=" + run_dir + " --set train.eval_every=4";
  const auto refused = run_cli(
      to + " --nproc 2 --set train.micro_batch=4 --set train.eval_batches=2", dir.path(), kEnv);
  EXPECT_EQ(refused.exit_code, 2) << refused.err << refused.out;
  EXPECT_NE(refused.err.find("the validation set, train.eval_batches x train.micro_batch "
                             "windows: 2 x 2 = 4 -> 2 x 4 = 8 (with train.micro_batch 4, "
                             "train.eval_batches 1 keeps it)"),
            std::string::npos)
      << refused.err;
  const auto refused_too = run_cli(
      to + " --nproc 1 --set train.micro_batch=8 --set train.eval_batches=1", dir.path(), kEnv);
  EXPECT_EQ(refused_too.exit_code, 2) << refused_too.err << refused_too.out;
  EXPECT_NE(refused_too.err.find("1 x 8 = 8 (no train.eval_batches keeps it with "
                                 "train.micro_batch 8; a micro_batch that divides 4 would)"),
            std::string::npos)
      << refused_too.err;
  EXPECT_EQ(test::slurp(run_dir + "/config.yaml"), config) << "a refusal rewrote config.yaml";

  const auto resumed = run_cli(
      to + " --nproc 2 --set train.micro_batch=4 --set train.eval_batches=1", dir.path(), kEnv);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_NE(resumed.out.find("resuming from " + checkpoint_path(run_dir, 4) + " (step 4)"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("train.micro_batch is 4, where the run in this directory had 2"),
            std::string::npos)
      << resumed.out;
  // events.jsonl says each start's micro-batch: why the run is not bit for bit.
  std::vector<int> started;
  std::istringstream events(test::slurp(run_dir + "/events.jsonl"));
  for (std::string line; std::getline(events, line);) {
    const auto e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_object() && e.value("event", "") == "started") {
      started.push_back(e.value("micro_batch", 0));
    }
  }
  EXPECT_EQ(started, (std::vector<int>{2, 4}));
  expect_the_same_training(dir.file("straight"), run_dir);
  // Validation over the same windows: at step 4 (before the kill) and 8, 12 (after).
  const auto want = test::val_losses_by_step(dir.file("straight/metrics.jsonl"));
  const auto got = test::val_losses_by_step(run_dir + "/metrics.jsonl");
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(got.size(), 3u);
  for (const auto& [step, loss] : want)
    EXPECT_NEAR(got.at(step), loss, 1e-5 * loss) << "step " << step;
}

}  // namespace
}  // namespace rm

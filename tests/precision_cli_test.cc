// parallel.precision: bf16 through the real binary, on the CPU backend (bf16 storage, fp32
// math): the loss tracks the fp32 run, 2 ranks in every shard mode track 1 rank, a killed bf16
// run resumes bit for bit (checkpoints hold the fp32 masters), and the final weights are fp32;
// the same for gradients reduced in bf16 (parallel.grad_reduce).
//
// Tolerances: bf16 keeps 8 bits of mantissa, so activations differ from fp32 by ~0.4% relative;
// over 30 steps of this small GPT the per-step training loss moves by at most a few hundredths
// of a nat (measured: max |bf16 - fp32| 0.013 nats). The tests allow 0.05 nats per step, about
// 2% of the loss, far below the ~0.5 nat drop the run makes, so a bf16 path that trained on
// garbage, or froze, would fail.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

constexpr double kLossTolerance = 0.05;  // nats, per step

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> v;
  for (const auto& [step, loss] : test::losses_by_step(metrics)) v.push_back(loss);
  return v;
}

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: precision
run_dir: )" + dir.file("fp32") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 30, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 10}
optimizer: {lr: 3.0e-3, warmup_steps: 5}
checkpoint: {every: 5, keep: 2, async: true}
)");
}

void expect_tracks(const std::vector<double>& want, const std::vector<double>& got,
                   const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  ASSERT_FALSE(want.empty());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(want[i] - got[i]));
  EXPECT_LE(worst, kLossTolerance) << what << ": largest per-step loss difference";
  EXPECT_LT(got.back(), got.front() - 0.3) << what << " must learn";
  EXPECT_GT(worst, 0.0) << what << ": bit-identical to fp32, so bf16 was not used";
}

TEST(PrecisionCli, Bf16TracksFp32OnOneRank) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const auto r = run_cli("run " + job + " --set run_dir=" + dir.file("bf16") +
                             " --set parallel.precision=bf16",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", bf16 |"), std::string::npos) << r.out;
  expect_tracks(losses(dir.file("fp32/metrics.jsonl")),
                losses(dir.file("bf16/metrics.jsonl")), "bf16");
  // weights.bin holds the fp32 masters: 4 bytes per parameter, not all on the bf16 grid.
  const std::string w = test::slurp(dir.file("bf16/weights.bin"));
  EXPECT_EQ(w.size(), test::slurp(dir.file("fp32/weights.bin")).size());
}

TEST(PrecisionCli, Bf16OnTwoRanksTracksOneRankInEveryShardMode) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string bf16 = " --set parallel.precision=bf16";
  ASSERT_EQ(run_cli("run " + job + bf16 + " --set run_dir=" + dir.file("np1"), dir.path())
                .exit_code,
            0);
  const auto one = losses(dir.file("np1/metrics.jsonl"));
  for (const char* mode : {"none", "optimizer", "gradients", "full"}) {
    const std::string run = dir.file(std::string("np2-") + mode);
    const auto r = run_cli("run " + job + bf16 + " --nproc 2 --set parallel.shard=" + mode +
                               " --set run_dir=" + run,
                           dir.path());
    ASSERT_EQ(r.exit_code, 0) << mode << "\n" << r.err;
    const auto two = losses(run + "/metrics.jsonl");
    ASSERT_EQ(one.size(), two.size()) << mode;
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_NEAR(one[i], two[i], kLossTolerance) << mode << " step " << i + 1;
    }
  }
}

// Kills a run with `flags` (and `fault`) at step 13, resumes it, and expects the weights of the
// uninterrupted run: checkpoints hold the fp32 masters, whatever is computed or sent in bf16.
void expect_killed_run_resumes_bit_for_bit(const std::string& flags, const std::string& fault) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job + flags + dir.file("straight"), dir.path()).exit_code, 0);
  const auto killed = run_cli("run " + job + flags + dir.file("killed"), dir.path(), fault);
  EXPECT_NE(killed.exit_code, 0);
  const auto resumed = run_cli("run " + job + flags + dir.file("killed"), dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  EXPECT_EQ(test::slurp(dir.file("straight/weights.bin")),
            test::slurp(dir.file("killed/weights.bin")))
      << "a resumed run must end on the uninterrupted fp32 masters";
}

TEST(PrecisionCli, KilledBf16RunResumesBitForBit) {
  expect_killed_run_resumes_bit_for_bit(
      " --set parallel.precision=bf16 --set checkpoint.async=false --set run_dir=",
      "RM_TEST_FAULT=kill:0:13");
}

// parallel.grad_reduce: bf16 (exactness per shard mode: grad_reduce_test) through the binary:
// the loss tracks the fp32 reduction on 2 ranks under ZeRO-1, and a killed run with compute and
// reduction both in bf16 resumes bit for bit under ZeRO-2.
TEST(PrecisionCli, Bf16GradientReductionTracksFp32) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string two = " --nproc 2 --set parallel.shard=optimizer --set run_dir=";
  ASSERT_EQ(run_cli("run " + job + two + dir.file("fp32"), dir.path()).exit_code, 0);
  const auto r = run_cli("run " + job + two + dir.file("wire") +
                             " --set parallel.grad_reduce=bf16",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gradients reduced in bf16"), std::string::npos) << r.out;
  expect_tracks(losses(dir.file("fp32/metrics.jsonl")), losses(dir.file("wire/metrics.jsonl")),
                "bf16 gradient reduction");
}

TEST(PrecisionCli, KilledRunWithBf16ReductionResumesBitForBit) {
  expect_killed_run_resumes_bit_for_bit(" --nproc 2 --set parallel.shard=gradients"
                                        " --set parallel.precision=bf16"
                                        " --set parallel.grad_reduce=bf16 --set run_dir=",
                                        "RM_TEST_FAULT=kill:1:13");
}

}  // namespace
}  // namespace rm

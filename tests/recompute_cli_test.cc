// The activation-memory levers through the real binary.
// model.recompute: 2 ranks, replicated and ZeRO-3 (whose prefetch follows the order units are
// acquired in), fp32 and bf16 on the CPU backend. Each run with recompute ends with the same
// weights.bin, byte for byte, and the same logged losses as the same job without it; and its
// activations, as the estimate counts them, are smaller. On one rank, a job dominated by
// activations peaks lower with it (recomputation took effect).
// model.classifier_chunk_tokens: on one rank, a job dominated by its logits peaks lower with
// it, logs the same losses up to rounding, and records the setting.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "configs/job_loader.h"
#include "planning/memory_estimate.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;

struct Case {
  const char* shard;
  const char* precision;
};

class RecomputeCli : public ::testing::TestWithParam<Case> {};

TEST_P(RecomputeCli, EndsWithTheSameWeightsAndLossesAsKeepingActivations) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", R"(name: recompute
model: {type: gpt, seq_len: 32, layers: 3, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 8, global_batch: 8, micro_batch: 2, eval_every: 4, log_every: 4}
optimizer: {lr: 3.0e-3, warmup_steps: 2}
checkpoint: {every: 0}
)");
  const std::string sets = std::string(" --set parallel.shard=") + GetParam().shard +
                           " --set parallel.precision=" + GetParam().precision;
  for (const char* recompute : {"false", "true"}) {
    const auto r = run_cli("run " + job + sets + " --set model.recompute=" + recompute +
                               " --set run_dir=" + dir.file(std::string("run-") + recompute) +
                               " --nproc 2",
                           dir.path());
    ASSERT_EQ(r.exit_code, 0) << recompute << "\n" << r.err << r.out;
  }
  const std::string kept = dir.file("run-false"), again = dir.file("run-true");
  EXPECT_EQ(test::losses_by_step(kept + "/metrics.jsonl"),
            test::losses_by_step(again + "/metrics.jsonl"));
  const std::string w = test::slurp(kept + "/weights.bin");
  ASSERT_FALSE(w.empty());
  EXPECT_TRUE(w == test::slurp(again + "/weights.bin")) << "weights.bin differs";

  const JobConfig keep_job = load_job(job, {}, 2);
  JobConfig again_job = keep_job;
  again_job.model.recompute = true;
  EXPECT_LT(estimate_memory(again_job, 2, ComputeKind::kCpu).activations,
            estimate_memory(keep_job, 2, ComputeKind::kCpu).activations);
}

// The rank's peak resident memory over a run, from its "finished" event; -1 if none.
// The last event named `name` in run_dir/events.jsonl (null if none).
nlohmann::json last_event(const std::string& run_dir, const std::string& name) {
  std::ifstream in(run_dir + "/events.jsonl");
  nlohmann::json found;
  for (std::string line; std::getline(in, line);) {
    const auto e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (e.is_object() && e.value("event", "") == name) found = e;
  }
  return found;
}

double finished_peak_rss_mib(const std::string& run_dir) {
  const nlohmann::json e = last_event(run_dir, "finished");
  return e.is_object() ? e.value("peak_rss_mib", -1.0) : -1.0;
}

// One run of `job` with `--set SET` into run_dir on one rank, which must succeed, log each of
// its `steps` steps once and leave a started and a finished event (a failure is recorded
// otherwise): its started event and its peak resident memory in MiB.
struct LeverRun {
  nlohmann::json started;
  double peak_mib = -1;
};
LeverRun run_one_rank(const TempDir& dir, const std::string& job, const std::string& set,
                      const std::string& run_dir, int steps) {
  const auto r = run_cli("run " + job + " --set " + set + " --set run_dir=" + run_dir, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(test::each_step_once(run_dir + "/metrics.jsonl", steps));
  LeverRun run{last_event(run_dir, "started"), finished_peak_rss_mib(run_dir)};
  EXPECT_TRUE(run.started.is_object()) << "no started event in " << run_dir;
  EXPECT_GT(run.peak_mib, 0) << "no finished event with peak_rss_mib in " << run_dir;
  return run;
}

// A memory lever took effect: the measured peaks of one-rank runs of `base` and of `lever` (peak[0]
// and peak[1], MiB) differ by at least half of what the estimate says the lever saves; without
// it taking effect the two would peak within noise of each other. The saving must be large
// enough (40 MiB) for that to mean much.
void expect_peak_saves_half_the_estimate(const JobConfig& base, const JobConfig& lever,
                                         const double (&peak)[2], const char* what) {
  const double saved_mib = (estimate_memory(base, 1, ComputeKind::kCpu).activations -
                            estimate_memory(lever, 1, ComputeKind::kCpu).activations) /
                           (1024.0 * 1024.0);
  ASSERT_GT(saved_mib, 40) << what << ": the job's arrays are too small for this check";
  std::printf("peak RSS: %.1f MiB without %s, %.1f MiB with it; the estimate saves %.1f MiB\n",
              peak[0], what, peak[1], saved_mib);
  EXPECT_LT(peak[1], peak[0] - saved_mib / 2)
      << what << ": the peak " << peak[1] << " MiB is not below " << peak[0] << " MiB by half of "
      << saved_mib << " MiB";
}

// Recomputation engaged, not just accepted: a job whose activations dominate its memory (6
// blocks of 8 x 256 tokens, 128 wide: attention scores and MLP activations of every block) runs
// with and without model.recompute on one rank; the run records the setting in its config.yaml
// and its started event, and its measured peak resident memory is lower by at least half of what the estimate says
// recomputation saves (the arrays of all blocks but one). Without it taking effect the two runs
// would peak within noise of each other.
TEST(RecomputeCli, PeakResidentMemoryIsLowerAndTheRunRecordsIt) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", R"(name: recompute-memory
model: {type: gpt, seq_len: 256, layers: 6, heads: 4, width: 128}
data: {train: data/tinyshakespeare.txt}
train: {steps: 2, global_batch: 8, micro_batch: 8, eval_every: 0, log_every: 1}
checkpoint: {every: 0}
parallel: {threads_per_rank: 1}
)");
  double peak[2] = {0, 0};
  for (const bool recompute : {false, true}) {
    const std::string run_dir = dir.file(recompute ? "run-true" : "run-false");
    const LeverRun run = run_one_rank(
        dir, job, std::string("model.recompute=") + (recompute ? "true" : "false"), run_dir, 2);
    ASSERT_FALSE(HasFailure());
    const JobConfig recorded = load_job(run_dir + "/config.yaml", {}, 1);
    EXPECT_EQ(recorded.model.recompute, recompute) << "config.yaml of " << run_dir;
    // The run says so where it starts (events.jsonl's started event), as it ran.
    EXPECT_EQ(run.started.value("recompute", !recompute), recompute) << run.started.dump();
    peak[recompute] = run.peak_mib;
  }
  JobConfig keep_job = load_job(job, {}, 1), again_job = keep_job;
  again_job.model.recompute = true;
  expect_peak_saves_half_the_estimate(keep_job, again_job, peak, "recompute");
}

// The classifier in chunks engaged, not just accepted: a job whose logits dominate its memory
// (8 x 128 tokens over a vocabulary of 16384: 64 MiB of fp32 logits) runs with the whole
// micro-batch's logits and with 128 tokens' at a time. The chunked run records the setting,
// logs the same losses to 1e-5, and peaks lower by at least half of what the estimate says the
// chunks save (56 MiB of logits).
TEST(ClassifierChunksCli, PeakResidentMemoryIsLowerWithTheSameLosses) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", R"(name: classifier-chunks
model: {type: gpt, vocab_size: 16384, seq_len: 128, layers: 2, heads: 2, width: 64}
data: {train: data/tinyshakespeare.txt}
train: {steps: 3, global_batch: 8, micro_batch: 8, eval_every: 0, log_every: 1}
checkpoint: {every: 0}
parallel: {threads_per_rank: 1}
)");
  double peak[2] = {0, 0};
  std::map<int, double> losses[2];
  for (const int chunk : {0, 128}) {
    const std::string run_dir = dir.file("run-" + std::to_string(chunk));
    const LeverRun run = run_one_rank(
        dir, job, "model.classifier_chunk_tokens=" + std::to_string(chunk), run_dir, 3);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(load_job(run_dir + "/config.yaml", {}, 1).model.classifier_chunk_tokens, chunk);
    EXPECT_EQ(run.started.value("classifier_chunk_tokens", -1), chunk) << run.started.dump();
    losses[chunk > 0] = test::losses_by_step(run_dir + "/metrics.jsonl");
    peak[chunk > 0] = run.peak_mib;
  }
  ASSERT_EQ(losses[0].size(), 3u);
  ASSERT_EQ(losses[1].size(), 3u);
  for (const auto& [step, loss] : losses[0]) {
    EXPECT_NEAR(losses[1][step], loss, 1e-5 * loss) << "step " << step;
  }
  JobConfig whole_job = load_job(job, {}, 1), chunked_job = whole_job;
  chunked_job.model.classifier_chunk_tokens = 128;
  expect_peak_saves_half_the_estimate(whole_job, chunked_job, peak, "classifier chunks");
}

INSTANTIATE_TEST_SUITE_P(Modes, RecomputeCli,
                         ::testing::Values(Case{"none", "fp32"}, Case{"full", "fp32"},
                                           Case{"full", "bf16"}),
                         [](const auto& info) {
                           return std::string(info.param.shard) + "_" + info.param.precision;
                         });

}  // namespace
}  // namespace rm

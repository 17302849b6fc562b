// model.recompute through the real binary: 2 ranks, replicated and ZeRO-3 (whose prefetch
// follows the order units are acquired in), fp32 and bf16 on the CPU backend. Each run with
// recompute ends with the same weights.bin, byte for byte, and the same logged losses as the
// same job without it; and its activations, as the estimate counts them, are smaller. On one
// rank, a job dominated by activations peaks lower with it (recomputation took effect).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
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
    const auto r = run_cli("run " + job + " --set model.recompute=" +
                               (recompute ? "true" : "false") + " --set run_dir=" + run_dir,
                           dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_TRUE(test::each_step_once(run_dir + "/metrics.jsonl", 2));
    const JobConfig recorded = load_job(run_dir + "/config.yaml", {}, 1);
    EXPECT_EQ(recorded.model.recompute, recompute) << "config.yaml of " << run_dir;
    // The run says so where it starts (events.jsonl's started event), as it ran.
    const nlohmann::json started = last_event(run_dir, "started");
    ASSERT_TRUE(started.is_object()) << "no started event in " << run_dir;
    EXPECT_EQ(started.value("recompute", !recompute), recompute) << started.dump();
    peak[recompute] = finished_peak_rss_mib(run_dir);
    ASSERT_GT(peak[recompute], 0) << "no finished event with peak_rss_mib in " << run_dir;
  }
  JobConfig keep_job = load_job(job, {}, 1), again_job = keep_job;
  again_job.model.recompute = true;
  const double saved_mib = (estimate_memory(keep_job, 1, ComputeKind::kCpu).activations -
                            estimate_memory(again_job, 1, ComputeKind::kCpu).activations) /
                           (1024.0 * 1024.0);
  ASSERT_GT(saved_mib, 40) << "the job's activations are too small for this check to mean much";
  std::printf("peak RSS: %.1f MiB keeping activations, %.1f MiB recomputing; estimate saves %.1f MiB\n",
              peak[0], peak[1], saved_mib);
  EXPECT_LT(peak[1], peak[0] - saved_mib / 2)
      << "recompute's peak " << peak[1] << " MiB is not below " << peak[0] << " MiB by half of "
      << saved_mib << " MiB";
}

INSTANTIATE_TEST_SUITE_P(Modes, RecomputeCli,
                         ::testing::Values(Case{"none", "fp32"}, Case{"full", "fp32"},
                                           Case{"full", "bf16"}),
                         [](const auto& info) {
                           return std::string(info.param.shard) + "_" + info.param.precision;
                         });

}  // namespace
}  // namespace rm

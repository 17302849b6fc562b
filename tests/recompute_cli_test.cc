// model.recompute through the real binary: 2 ranks, replicated and ZeRO-3 (whose prefetch
// follows the order units are acquired in), fp32 and bf16 on the CPU backend. Each run with
// recompute ends with the same weights.bin, byte for byte, and the same logged losses as the
// same job without it; and its activations, as the estimate counts them, are smaller.
#include <gtest/gtest.h>

#include <string>

#include "configs/job_loader.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "worker/data/test_util.h"
#include "worker/memory_estimate.h"

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
    ASSERT_EQ(r.exit_code, 0) << recompute << "\n" << r.out << r.err;
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

INSTANTIATE_TEST_SUITE_P(Modes, RecomputeCli,
                         ::testing::Values(Case{"none", "fp32"}, Case{"full", "fp32"},
                                           Case{"full", "bf16"}),
                         [](const auto& info) {
                           return std::string(info.param.shard) + "_" + info.param.precision;
                         });

}  // namespace
}  // namespace rm

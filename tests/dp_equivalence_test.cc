// Data parallelism changes nothing but speed: for every shard mode, 20 steps on the ranks this
// binary was started with (mpirun -np 1, 2 or 4) match 20 steps of the same job on one rank,
// computed in-process on every rank as the reference: per-step loss within 1e-5 relative and
// final parameters within 1e-5. With model.dropout too (masks keyed by the global sample index).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"
#include "collectives/self_communicator.h"
#include "planning/memory_estimate.h"
#include "tests/small_gpt_job.h"
#include "worker/trainer.h"

namespace rm {
namespace {

JobConfig small_job(const std::string& shard, bool overlap) {
  JobConfig job = test::small_gpt_job(shard, /*bucket_mb=*/0.02);
  job.data.train = {"data/tinyshakespeare.txt"};
  job.data.val_fraction = 0.1;
  job.train.steps = 20;
  job.train.global_batch = 8;  // 1 rank: 4 micro-batches of 2; 2 ranks: 2; 4 ranks: 1
  job.train.micro_batch = 2;
  job.train.eval_batches = 4;
  job.optimizer.lr = 3e-3;
  job.optimizer.warmup_steps = 5;
  job.parallel.overlap = overlap;
  return job;
}

struct Trajectory {
  std::vector<double> losses;
  double val_loss = 0;
  std::vector<float> params;
};

Trajectory train(const JobConfig& job, Communicator& comm) {
  TrainingData data = open_training_data(job);
  Trainer trainer(job, data, comm, {false, nullptr});
  Trajectory t;
  for (int64_t s = 0; s < job.train.steps; ++s) t.losses.push_back(trainer.train_step(s).loss);
  t.val_loss = trainer.evaluate();
  t.params = trainer.state().full_params();
  return t;
}

// Per-step losses within 1e-5 relative, the validation loss too, parameters within 1e-5.
void expect_same_training(const Trajectory& got, const Trajectory& ref) {
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "step " << s + 1;
  }
  EXPECT_NEAR(got.val_loss, ref.val_loss, 1e-5 * std::abs(ref.val_loss));
  ASSERT_EQ(got.params.size(), ref.params.size());
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.params.size(); ++i) {
    const double d = std::abs(static_cast<double>(got.params[i]) - ref.params[i]);
    worst = std::max(worst, d);
    bad += d > 1e-5;
  }
  EXPECT_EQ(bad, 0u) << "parameters differing by more than 1e-5; worst " << worst;
}

class DataParallel : public testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(DataParallel, MatchesOneRank) {
  const auto [shard, overlap] = GetParam();
  const JobConfig job = small_job(shard, overlap);
  auto self = make_self_communicator();
  JobConfig reference_job = small_job("none", true);
  const Trajectory ref = train(reference_job, *self);

  CommOptions options;
  options.timeout_s = 60;
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options);
  expect_same_training(train(job, *comm), ref);
  // And training really happened: the loss fell.
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.5);
}

TEST_P(DataParallel, PerRankStateShrinksWithTheRankCount) {
  const auto [shard, overlap] = GetParam();
  const JobConfig job = small_job(shard, overlap);
  CommOptions options;
  options.timeout_s = 60;
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options);
  TrainingData data = open_training_data(job);
  Trainer trainer(job, data, *comm, {false, nullptr});
  trainer.train_step(0);
  const size_t total = trainer.model().layout().size() * sizeof(float);
  const size_t mine = shard_counts(trainer.model().layout().size(), comm->size())[comm->rank()] *
                      sizeof(float);
  const MemoryPlan m = trainer.state().memory_plan();
  const bool zero1 = shard != "none", zero2 = shard == "gradients" || shard == "full",
             zero3 = shard == "full";
  EXPECT_EQ(m.optimizer_bytes, 2 * (zero1 ? mine : total));
  EXPECT_EQ(m.grad_bytes, zero2 ? mine : total);
  EXPECT_EQ(m.param_bytes, zero3 ? mine : total);
  // Unit scratch (ZeRO-2/3) is a few units' worth (held, being reduced), not a full copy.
  size_t largest = 0;
  for (const ParamUnit& u : trainer.model().units()) largest = std::max(largest, u.size());
  EXPECT_LE(m.scratch_bytes, 5 * largest * sizeof(float));
  if (!zero2) {
    EXPECT_EQ(m.scratch_bytes, 0u);
  }
  // What validate and run estimate (planning/memory_estimate.h) is what the largest rank, rank 0,
  // holds, and every rank's scratch pool once an evaluation and another step have run.
  trainer.evaluate();
  trainer.train_step(1);
  const MemoryPlan after = trainer.state().memory_plan();
  const MemoryEstimate e = estimate_memory(job, comm->size(), ComputeKind::kCpu);
  if (comm->rank() == 0) {
    EXPECT_EQ(e.parameters, static_cast<double>(after.param_bytes));
    EXPECT_EQ(e.gradients, static_cast<double>(after.grad_bytes));
    EXPECT_EQ(e.optimizer, static_cast<double>(after.optimizer_bytes));
  }
  EXPECT_EQ(e.buffers, static_cast<double>(after.scratch_bytes));
}

// model.dropout: every sequence draws its masks by its global sample index, so N ranks drop what
// one rank drops (the micro-batches are numbered differently: 4 a rank on 1 rank, 1 on 4), and
// the run differs from one without dropout.
TEST(DataParallelDropout, MatchesOneRank) {
  JobConfig job = small_job("optimizer", true);
  job.model.dropout = 0.2;
  auto self = make_self_communicator();
  const Trajectory ref = train(job, *self);
  JobConfig plain = job;
  plain.model.dropout = 0;
  EXPECT_NE(train(plain, *self).losses[0], ref.losses[0]) << "dropout changed nothing";

  CommOptions options;
  options.timeout_s = 60;
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options);
  expect_same_training(train(job, *comm), ref);
}

INSTANTIATE_TEST_SUITE_P(
    ShardModes, DataParallel,
    testing::Combine(testing::Values("none", "optimizer", "gradients", "full"), testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_overlap" : "_no_overlap");
    });

}  // namespace
}  // namespace rm

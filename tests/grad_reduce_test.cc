// parallel.grad_reduce: bf16 reduces exactly what it promises, in every shard mode, on the ranks
// this binary was started with (mpirun -np 2 and 3: even and uneven shards): the gradient the
// optimizer sees is round_bf16(sum over ranks of round_bf16(g_r)), summed in fp32 -- checked
// through the global gradient norm against that formula, and against the fp32 reduction, which
// the chosen values make differ by far more than the tolerance.
//
// The gradients are written straight into the ShardedState through its ParamAccess interface
// (acquire_grads / release_grads in backward order), so the test covers the buckets (none,
// optimizer), the per-unit reduce-scatter (gradients, full) and the overlap path.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"
#include "kernels/bf16.h"
#include "model/model.h"
#include "tests/small_gpt_job.h"
#include "worker/sharded_state.h"

namespace rm {
namespace {

JobConfig small_job(const std::string& shard, const std::string& grad_reduce) {
  JobConfig job = test::small_gpt_job(shard);
  job.parallel.grad_reduce = choice_of<Precision>(grad_reduce);
  return job;
}

// Rank r's gradient element i: 1 + k/1024 with k in 0..12 -- exact in fp32, not on the bf16
// grid (8 bits of mantissa) for most k, and rank sums that round again.
float gradient(int rank, size_t i) {
  return 1.0f + static_cast<float>((i * 7 + static_cast<size_t>(rank) * 5) % 13) / 1024.0f;
}

double expected_norm(size_t total, int ranks, bool bf16_wire) {
  double sq = 0;
  for (size_t i = 0; i < total; ++i) {
    float sum = 0;
    for (int r = 0; r < ranks; ++r) {
      const float g = gradient(r, i);
      sum += bf16_wire ? to_float(to_bf16(g)) : g;
    }
    const double reduced = bf16_wire ? to_float(to_bf16(sum)) : sum;
    sq += reduced * reduced;
  }
  return std::sqrt(sq);
}

double reduced_norm(const JobConfig& job, Communicator& comm) {
  auto model = make_model(job.model, 1, nullptr, Precision::kFp32);
  ShardedState state(job, *model, comm);
  state.init_params(1);
  state.begin_step();
  state.begin_micro_batch(/*last_of_step=*/true);
  const auto& units = model->units();
  for (int u = static_cast<int>(units.size()) - 1; u >= 0; --u) {
    float* g = state.acquire_grads(u);
    for (size_t i = units[u].begin; i < units[u].end; ++i) {
      g[i - units[u].begin] = gradient(comm.rank(), i);
    }
    state.release_grads(u);
  }
  state.finish_backward();
  return state.grad_norm();
}

class GradReduce : public testing::TestWithParam<std::string> {};

TEST_P(GradReduce, Bf16IsTheRoundedSumOfRoundedGradients) {
  CommOptions options;
  options.abort_on_error = false;
  options.timeout_s = 60;
  auto owned = make_mpi_communicator(MPI_COMM_WORLD, options);
  Communicator& comm = *owned;
  const std::string shard = GetParam();
  const size_t total = make_model(small_job(shard, "fp32").model, 1, nullptr, Precision::kFp32)
                           ->layout()
                           .size();
  const double want16 = expected_norm(total, comm.size(), true);
  const double want32 = expected_norm(total, comm.size(), false);
  ASSERT_GT(std::abs(want16 - want32), 1e-4 * want32) << "the values must tell the two apart";

  const double got16 = reduced_norm(small_job(shard, "bf16"), comm);
  const double got32 = reduced_norm(small_job(shard, "fp32"), comm);
  // Only the order of the squares' summation differs from the reference: 1e-9 relative.
  EXPECT_NEAR(got16, want16, 1e-9 * want16) << shard << ", bf16 reduction";
  EXPECT_NEAR(got32, want32, 1e-9 * want32) << shard << ", fp32 reduction";
}

INSTANTIATE_TEST_SUITE_P(AllShardModes, GradReduce,
                         testing::Values("none", "optimizer", "gradients", "full"));

}  // namespace
}  // namespace rm

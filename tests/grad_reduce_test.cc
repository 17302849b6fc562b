// parallel.grad_reduce: bf16 reduces exactly what it promises, in every shard mode, on the ranks
// this binary was started with (mpirun -np 2 and 3: even and uneven shards): the gradient the
// optimizer sees is round_bf16(sum over ranks of round_bf16(g_r)), summed in fp32 -- checked
// through the global gradient norm against that formula, and against the fp32 reduction, which
// the chosen values make differ by far more than the tolerance; and element by element, through
// the first Adam moment of each rank's slice after one update (a reduction that put the right
// sums in the wrong places would keep the norm).
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

float expected_element(size_t i, int ranks, bool bf16_wire) {
  float sum = 0;
  for (int r = 0; r < ranks; ++r) {
    const float g = gradient(r, i);
    sum += bf16_wire ? to_float(to_bf16(g)) : g;
  }
  return bf16_wire ? to_float(to_bf16(sum)) : sum;
}

double expected_norm(size_t total, int ranks, bool bf16_wire) {
  double sq = 0;
  for (size_t i = 0; i < total; ++i) {
    const double reduced = expected_element(i, ranks, bf16_wire);
    sq += reduced * reduced;
  }
  return std::sqrt(sq);
}

// What one step reduced: the global gradient norm, and this rank's slice [begin, begin + m.size())
// of the first Adam moment after one update from zero moments, which is (1 - beta1) * gradient.
struct Reduced {
  double norm = 0;
  size_t begin = 0;
  std::vector<float> m;
};

Reduced reduce_once(JobConfig job, Communicator& comm) {
  job.optimizer.grad_clip = 0;  // the moment holds the reduced gradient itself, unscaled
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
  Reduced out;
  out.norm = state.grad_norm();
  state.optimizer_step(1e-3);
  for (int r = 0; r < comm.rank(); ++r) out.begin += state.slice_counts()[r];
  const ShardedState::LocalPart m = state.own_slices()[1];
  out.m.assign(m.data, m.data + m.floats);
  return out;
}

// The slice's elements against the formula; the first wrong one is named.
void expect_elements(const Reduced& got, int ranks, bool bf16_wire, double beta1,
                     const std::string& what) {
  ASSERT_FALSE(got.m.empty()) << what;
  for (size_t k = 0; k < got.m.size(); ++k) {
    const size_t i = got.begin + k;
    const double want = (1 - beta1) * expected_element(i, ranks, bf16_wire);
    if (std::abs(got.m[k] - want) > 1e-6 * want) {
      ADD_FAILURE() << what << ": element " << i << "'s first moment is " << got.m[k]
                    << ", (1 - beta1) x the reduced gradient is " << want;
      return;
    }
  }
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

  const JobConfig job16 = small_job(shard, "bf16");
  const Reduced got16 = reduce_once(job16, comm);
  const Reduced got32 = reduce_once(small_job(shard, "fp32"), comm);
  // Only the order of the squares' summation differs from the reference: 1e-9 relative.
  EXPECT_NEAR(got16.norm, want16, 1e-9 * want16) << shard << ", bf16 reduction";
  EXPECT_NEAR(got32.norm, want32, 1e-9 * want32) << shard << ", fp32 reduction";
  // Element by element: the moment is one fp32 product of the gradient (1e-6 relative), while
  // bf16's rounding moves most elements by far more (up to 2^-9 relative).
  const double beta1 = job16.optimizer.beta1;
  expect_elements(got16, comm.size(), true, beta1, shard + ", bf16 reduction");
  expect_elements(got32, comm.size(), false, beta1, shard + ", fp32 reduction");
}

INSTANTIATE_TEST_SUITE_P(AllShardModes, GradReduce,
                         testing::Values("none", "optimizer", "gradients", "full"));

}  // namespace
}  // namespace rm

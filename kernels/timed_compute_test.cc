// TimedCompute (kernels/timed_compute.h) over the cpu backend: results pass through unchanged,
// calls, allocations and host returns are counted whether or not timing is on, and only timed
// calls appear in ops(), under their name and shape.
#include "kernels/timed_compute.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/compute_factory.h"

namespace rm {
namespace {

TEST(TimedCompute, PassesResultsThroughAndTimesOnlyWhileOn) {
  std::unique_ptr<Compute> cpu = make_compute(ComputeKind::kCpu, {});
  TimedCompute t(*cpu);
  const int N = 4, C = 8, OC = 3;
  auto* x = static_cast<float*>(t.allocate(N * C * sizeof(float)));
  auto* w = static_cast<float*>(t.allocate(OC * C * sizeof(float)));
  auto* y = static_cast<float*>(t.allocate(N * OC * sizeof(float)));
  std::vector<float> ones(N * C, 1.0f), half(OC * C, 0.5f);
  t.upload(x, ones.data(), ones.size() * sizeof(float));
  t.upload(w, half.data(), half.size() * sizeof(float));

  t.layers_f32().linear_forward(y, x, w, nullptr, N, C, OC);  // not timed: counted only
  EXPECT_TRUE(t.ops().empty());
  t.set_timing(true);
  t.layers_f32().linear_forward(y, x, w, nullptr, N, C, OC);
  const double ss = t.sum_squares(y, N * OC);  // each y = 8 x 0.5 = 4
  t.set_timing(false);

  EXPECT_DOUBLE_EQ(ss, N * OC * 16.0);
  const std::vector<TimedCompute::Op> ops = t.ops();
  ASSERT_EQ(ops.size(), 2u);
  for (const TimedCompute::Op& op : ops) {
    EXPECT_TRUE(op.name == "linear_forward 4x8->3" || op.name == "sum_squares") << op.name;
    EXPECT_EQ(op.calls, 1);
    EXPECT_GE(op.seconds, 0.0);
  }
  EXPECT_EQ(t.counts().allocations, 3);
  EXPECT_EQ(t.counts().largest_allocation, N * C * sizeof(float));
  EXPECT_EQ(t.counts().calls, 5);       // 2 uploads, 2 linear_forward, 1 sum_squares
  EXPECT_EQ(t.counts().host_syncs, 1);  // sum_squares returned a value
  t.reset();
  EXPECT_TRUE(t.ops().empty());
  EXPECT_EQ(t.counts().calls, 0);
  t.release(y);
  t.release(w);
  t.release(x);
}

}  // namespace
}  // namespace rm

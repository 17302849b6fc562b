// TimedCompute (kernels/timed_compute.h) over the cpu backend: results pass through unchanged,
// calls, allocations and host returns are counted whether or not timing is on, and only timed
// calls appear in ops(), under their name and shape.
#include "kernels/timed_compute.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
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

// The classifier's same_wte promise (LayerKernels::queue_classifier_forward_backward) reaches
// the backend through TimedCompute, and the backend checks it against the call before: no call
// before, or another wte, is refused before anything runs; the same call again is taken.
TEST(TimedCompute, PassesTheClassifiersSameWtePromiseToTheBackendWhichChecksIt) {
  std::unique_ptr<Compute> cpu = make_compute(ComputeKind::kCpu, {});
  TimedCompute t(*cpu);
  LayerKernels<float>& k = t.layers_f32();
  const int N = 2, C = 4, V = 5;
  std::vector<float> inp(N * C, 0.5f), wte(V * C, 0.25f), other(V * C, 0.25f);
  std::vector<float> scratch(k.classifier_scratch_elements(N, C, V)), dinp(N * C);
  std::vector<float> dwte(V * C, 0.0f);
  const std::vector<int> targets = {1, 3};
  auto call = [&](const std::vector<float>& w, bool same_wte) {
    k.queue_classifier_forward_backward(dinp.data(), dwte.data(), scratch.data(), inp.data(),
                                        w.data(), targets.data(), N, C, V, 1.0f, same_wte);
  };
  EXPECT_THROW(call(wte, true), std::logic_error);
  EXPECT_EQ(k.take_queued_loss(), 0.0);
  call(wte, false);
  call(wte, true);
  EXPECT_GT(k.take_queued_loss(), 0.0);
  const std::vector<float> dwte_before = dwte;
  EXPECT_THROW(call(other, true), std::logic_error);
  EXPECT_EQ(dwte, dwte_before);
  call(other, false);
}

}  // namespace
}  // namespace rm

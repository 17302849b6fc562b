// AdamWOptimizer's step count under the device-side guard (kernels/step_scalars.h): a step the
// guard skipped is not counted, so Adam's bias correction goes on from the last step that ran
// -- the same weights as a run in which the skipped step never happened.
#include "model/adamw_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_compute.h"

namespace rm {
namespace {

struct Fixture {
  std::unique_ptr<Compute> compute = cpu::make_cpu_compute(1);
  ParamLayout layout;
  OptimizerConfig config;
  Fixture() {
    layout.add("w", {4, 8}, true);
    layout.add("b", {8}, false);
    config.grad_clip = 1.0;
  }
};

std::vector<float> gradient(size_t n, int step) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(0.37f * static_cast<float>(i) + step);
  return g;
}

StepScalars scalars_of(const std::vector<float>& g, double loss) {
  StepScalars s;
  s.loss_sum = loss;
  for (float x : g) s.grad_sq += static_cast<double>(x) * x;
  return s;
}

TEST(AdamWOptimizer, ASkippedStepIsNotCountedAndChangesNothing) {
  Fixture f;
  const size_t n = f.layout.size();
  AdamWOptimizer skipping(f.config, f.layout, *f.compute), plain(f.config, f.layout, *f.compute);
  std::vector<float> p1(n, 0.5f), p2(n, 0.5f);
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = gradient(n, step);
    StepScalars s = scalars_of(g, 2.0);
    if (step == 2) {  // the skipping run sees a NaN loss here first, then the same batch again
      StepScalars bad = s;
      bad.loss_sum = std::nan("");
      const std::vector<float> before = p1;
      skipping.queue_step(p1.data(), g.data(), 1e-2, &bad);
      EXPECT_FALSE(skipping.finish_step(bad));
      EXPECT_EQ(p1, before);
      EXPECT_EQ(skipping.steps_taken(), 2);
    }
    skipping.queue_step(p1.data(), g.data(), 1e-2, &s);
    EXPECT_TRUE(skipping.finish_step(s));
    plain.queue_step(p2.data(), g.data(), 1e-2, &s);
    EXPECT_TRUE(plain.finish_step(s));
  }
  EXPECT_EQ(skipping.steps_taken(), 4);
  EXPECT_EQ(p1, p2) << "the skipped step left a trace";
  EXPECT_NE(p1, std::vector<float>(n, 0.5f));
}

TEST(AdamWOptimizer, StepsAreQueuedAndFinishedInPairs) {
  Fixture f;
  const size_t n = f.layout.size();
  AdamWOptimizer opt(f.config, f.layout, *f.compute);
  std::vector<float> p(n, 0.5f);
  const std::vector<float> g = gradient(n, 0);
  const StepScalars s = scalars_of(g, 1.0);
  EXPECT_THROW(opt.finish_step(s), std::logic_error);
  opt.queue_step(p.data(), g.data(), 1e-2, &s);
  EXPECT_THROW(opt.queue_step(p.data(), g.data(), 1e-2, &s), std::logic_error);
  EXPECT_TRUE(opt.finish_step(s));
}

}  // namespace
}  // namespace rm

#include "kernels/cpu/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_compute.h"
#include "kernels/cpu/test_util.h"

namespace rm::cpu {
namespace {

using testing::all_close;
using testing::random_floats;

// Worked by hand: p = 1, raw grad 0.5 with grad_scale 2 (so g = 1), lr 0.1, wd 0.1.
// With a constant gradient the bias-corrected moments are exactly mhat = 1, vhat = 1:
//   step 1: p = 1 * (1 - 0.01) - 0.1 * 1 / (1 + eps)          = 0.89
//           m = 0.1, v = 0.001
//   step 2: p = 0.89 * 0.99 - 0.1 * (0.19/0.19) / (1 + eps)   = 0.7811
//           m = 0.9*0.1 + 0.1 = 0.19, v = 0.999*0.001 + 0.001 = 0.001999
TEST(AdamW, HandComputedTwoSteps) {
  std::vector<float> p = {1.0f}, g = {0.5f}, m = {0.0f}, v = {0.0f};
  adamw_update(p.data(), g.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 2.0f);
  EXPECT_NEAR(p[0], 0.89f, 1e-6);
  EXPECT_NEAR(m[0], 0.1f, 1e-7);
  EXPECT_NEAR(v[0], 0.001f, 5e-8);  // 0.999f is 0.999 - 1.3e-5 relative
  adamw_update(p.data(), g.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, 2, 2.0f);
  EXPECT_NEAR(p[0], 0.7811f, 1e-6);
  EXPECT_NEAR(m[0], 0.19f, 1e-7);
  EXPECT_NEAR(v[0], 0.001999f, 5e-8);
}

// The spec's formula, literally, in double.
void adamw_ref(std::vector<double>& p, const std::vector<float>& g, std::vector<double>& m,
               std::vector<double>& v, double lr, double b1, double b2, double eps, double wd,
               int t, double grad_scale) {
  for (size_t i = 0; i < p.size(); ++i) {
    const double gi = g[i] * grad_scale;
    p[i] -= lr * wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] -= lr * (m[i] / (1 - std::pow(b1, t))) / (std::sqrt(v[i] / (1 - std::pow(b2, t))) + eps);
  }
}

TEST(AdamW, MatchesDoubleReferenceOverSteps) {
  for (size_t n : {size_t{1003}, size_t{100003}}) {  // serial and parallel paths
    for (float wd : {0.0f, 0.1f}) {
      const auto p0 = random_floats(n, 1);
      std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
      std::vector<double> rp(p0.begin(), p0.end()), rm(n, 0.0), rv(n, 0.0);
      for (int t = 1; t <= 3; ++t) {
        const auto g = random_floats(n, 10 + t, -2.0f, 2.0f);
        adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, wd, t,
                     0.5f);
        adamw_ref(rp, g, rm, rv, 1e-2, 0.9f, 0.95f, 1e-8, wd, t, 0.5);
      }
      EXPECT_TRUE(all_close(p, rp, 1e-6, 1e-7)) << "n " << n << " wd " << wd;
      EXPECT_TRUE(all_close(m, rm, 1e-5, 1e-7)) << "n " << n << " wd " << wd;
      EXPECT_TRUE(all_close(v, rv, 1e-5, 1e-9)) << "n " << n << " wd " << wd;
    }
  }
}

// Compute::adamw_update_ranges with a bf16 copy asked for (mixed precision's compute weights):
// the masters and moments as without it, the copy the rounding of each updated master, and
// elements in no range (20..29) left as they were.
TEST(AdamW, RangesWriteTheBf16CopyOfTheUpdatedMasters) {
  const std::unique_ptr<Compute> compute = make_cpu_compute(1);
  const size_t n = 100;
  const std::vector<AdamWRange> ranges = {{0, 20, true}, {30, 70, false}};
  const std::vector<float> g = random_floats(n, 3);
  std::vector<float> p = random_floats(n, 1), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> p1 = p, m1 = m, v1 = v;
  std::vector<bf16> copy(n, bf16{0x1234});
  compute->adamw_update_ranges(p.data(), g.data(), m.data(), v.data(), ranges, 0.1f, 0.9f, 0.95f,
                               1e-8f, 0.1f, 1, 1.0f, copy.data());
  compute->adamw_update_ranges(p1.data(), g.data(), m1.data(), v1.data(), ranges, 0.1f, 0.9f,
                               0.95f, 1e-8f, 0.1f, 1, 1.0f);
  EXPECT_EQ(p, p1);
  EXPECT_EQ(m, m1);
  EXPECT_EQ(v, v1);
  for (size_t i = 0; i < n; ++i) {
    const bool in_range = i < 20 || i >= 30;
    EXPECT_EQ(copy[i].bits, in_range ? to_bf16(p[i]).bits : 0x1234) << "element " << i;
  }
  EXPECT_NE(p[0], random_floats(n, 1)[0]) << "nothing was updated";
}

// The guard of a training step (kernels/step_scalars.h): a non-finite loss or gradient norm
// leaves params, moments and the bf16 copy as they were; a finite one clips by the norm, the
// same bits as an unguarded call given clip_factor as its grad_scale.
TEST(AdamW, AGuardSkipsANonFiniteStepAndClipsByTheNorm) {
  const std::unique_ptr<Compute> compute = make_cpu_compute(1);
  const size_t n = 64;
  const std::vector<AdamWRange> ranges = {{0, 40, true}, {40, 24, false}};
  const std::vector<float> g = random_floats(n, 5);
  const std::vector<float> p0 = random_floats(n, 6), m0 = random_floats(n, 7);
  const std::vector<float> v0(n, 0.25f);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const auto run = [&](const StepScalars* scalars, double max_norm, float grad_scale,
                       StepLimits limits = {}) {
    std::vector<float> p = p0, m = m0, v = v0;
    std::vector<bf16> copy(n, bf16{0x1234});
    const AdamWGuard guard{scalars, max_norm, limits};
    compute->adamw_update_ranges(p.data(), g.data(), m.data(), v.data(), ranges, 0.1f, 0.9f, 0.95f,
                                 1e-8f, 0.1f, 2, grad_scale, copy.data(),
                                 scalars != nullptr ? &guard : nullptr);
    std::vector<float> all = p;
    all.insert(all.end(), m.begin(), m.end());
    all.insert(all.end(), v.begin(), v.end());
    for (const bf16& b : copy) all.push_back(b.bits);
    return all;
  };
  // Even a zero gradient moves the weights (decay) and the moments.
  const std::vector<float> updated = run(nullptr, 0, 0.0f);
  std::vector<float> unchanged = p0;
  unchanged.insert(unchanged.end(), m0.begin(), m0.end());
  unchanged.insert(unchanged.end(), v0.begin(), v0.end());
  unchanged.insert(unchanged.end(), n, static_cast<float>(0x1234));
  for (const StepScalars bad : {StepScalars{nan, 4.0}, StepScalars{inf, 4.0}, StepScalars{1.0, nan},
                                StepScalars{1.0, inf}}) {
    EXPECT_EQ(run(&bad, 1.0, 1.0f), unchanged) << bad.loss_sum << " " << bad.grad_sq;
  }
  EXPECT_NE(updated, unchanged) << "the comparison cannot tell an update from none";
  const StepScalars big{3.0, 16.0};  // norm 4
  EXPECT_EQ(run(&big, 1.0, 1.0f), run(nullptr, 0, static_cast<float>(1.0 / (4.0 + 1e-6))));
  EXPECT_EQ(run(&big, 0.0, 1.0f), run(nullptr, 0, 1.0f)) << "grad_clip 0: no clipping";
  EXPECT_EQ(run(&big, 8.0, 1.0f), run(nullptr, 0, 1.0f)) << "a norm under the clip";
  EXPECT_EQ(run(&big, 8.0, 0.5f), run(nullptr, 0, 0.5f)) << "grad_scale still applies";
  EXPECT_EQ(clip_factor(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(step_grad_norm(big), 4.0);
  EXPECT_TRUE(step_is_finite(big));
  // A spike (resilience.spike_*_zscore): past either limit, nothing moves; at it, the update.
  EXPECT_EQ(run(&big, 1.0, 1.0f, {2.9, inf}), unchanged) << "a loss sum over its limit";
  EXPECT_EQ(run(&big, 1.0, 1.0f, {inf, 3.9}), unchanged) << "a norm over its limit";
  EXPECT_EQ(run(&big, 1.0, 1.0f, {3.0, 4.0}), run(&big, 1.0, 1.0f)) << "at the limits";
  EXPECT_FALSE(step_is_applied(big, {2.9, inf}));
  EXPECT_TRUE(step_is_applied(big, {}));
}

TEST(AdamW, RejectsStepZero) {
  float p = 0, g = 0, m = 0, v = 0;
  EXPECT_THROW(adamw_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1.0f),
               std::invalid_argument);
}

}  // namespace
}  // namespace rm::cpu

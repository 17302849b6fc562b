#include "model/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "configs/lr_decay_start.h"

namespace rm {
namespace {

OptimizerConfig opt(const char* schedule) {
  OptimizerConfig o;
  o.lr = 1.0;
  o.min_lr = 0.1;
  o.warmup_steps = 10;
  o.schedule = choice_of<LrScheduleKind>(schedule);
  return o;
}

TEST(LrSchedule, WarmupIsLinearFromLrOverWarmup) {
  EXPECT_DOUBLE_EQ(learning_rate(opt("cosine"), 0, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(opt("cosine"), 4, 110), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(opt("cosine"), 9, 110), 1.0);
}

TEST(LrSchedule, CosineAndLinearDecayToMinLrAtTheLastStep) {
  for (const char* s : {"cosine", "linear"}) {
    EXPECT_DOUBLE_EQ(learning_rate(opt(s), 10, 111), 1.0) << s;
    EXPECT_NEAR(learning_rate(opt(s), 60, 111), 0.55, 1e-12) << s;  // halfway: both at the mean
    EXPECT_DOUBLE_EQ(learning_rate(opt(s), 110, 111), 0.1) << s;
  }
  EXPECT_NEAR(learning_rate(opt("cosine"), 35, 111), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-12);
  EXPECT_NEAR(learning_rate(opt("linear"), 35, 111), 0.1 + 0.9 * 0.75, 1e-12);
}

// wsd: warmup, lr until the last 20% of 110 steps (22: from step 88), then linear to min_lr at
// the last step; before step 88 the total does not matter (what lets a run be extended).
TEST(LrSchedule, WsdHoldsLrThenDecaysLinearlyOverItsLastFraction) {
  OptimizerConfig o = opt("wsd");
  o.decay_fraction = 0.2;
  EXPECT_DOUBLE_EQ(learning_rate(o, 4, 110), 0.5);  // the warmup as the others'
  EXPECT_DOUBLE_EQ(learning_rate(o, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 87, 110), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 88, 110), 1.0);  // the decay's first step: progress 0
  EXPECT_NEAR(learning_rate(o, 98, 110), 0.1 + 0.9 * (1.0 - 10.0 / 21.0), 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate(o, 109, 110), 0.1);
  for (int64_t step = 0; step < 88; ++step) {
    ASSERT_EQ(learning_rate(o, step, 110), learning_rate(o, step, 1000)) << step;
  }
  EXPECT_NE(learning_rate(opt("cosine"), 50, 110), learning_rate(opt("cosine"), 50, 1000));
  // A decay of under two steps (0.2 x 7 rounds to 1) is two: the last step still ends at min_lr.
  o.warmup_steps = 2;
  EXPECT_DOUBLE_EQ(learning_rate(o, 4, 7), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 5, 7), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 6, 7), 0.1);
  o.decay_fraction = 0.001;
  EXPECT_DOUBLE_EQ(learning_rate(o, 98, 100), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 99, 100), 0.1);
  o.decay_fraction = 0.2;
  o.warmup_steps = 10;
  // A decay longer than what follows the warmup starts after the warmup.
  o.decay_fraction = 1.0;
  EXPECT_DOUBLE_EQ(learning_rate(o, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(o, 109, 110), 0.1);
  EXPECT_LT(learning_rate(o, 11, 110), 1.0);
}

// decay_start, which a resumed run's line names, is the schedule's: lr from the warmup's end
// through it, lower right after, for each decaying schedule and a spread of lengths.
TEST(LrSchedule, DecayStartIsTheLastStepAtLr) {
  for (const char* s : {"cosine", "linear", "wsd"}) {
    for (const double fraction : {0.001, 0.2, 0.5, 1.0}) {
      for (const int64_t total : {12, 13, 110, 1000}) {
        OptimizerConfig o = opt(s);
        o.decay_fraction = fraction;
        const int64_t start = decay_start(o, total);
        SCOPED_TRACE(std::string(s) + " fraction " + std::to_string(fraction) + " steps " +
                     std::to_string(total) + " start " + std::to_string(start));
        ASSERT_GE(start, o.warmup_steps);
        ASSERT_LT(start, total - 1);
        for (int64_t step = o.warmup_steps; step <= start; ++step) {
          ASSERT_EQ(learning_rate(o, step, total), o.lr) << step;
        }
        EXPECT_LT(learning_rate(o, start + 1, total), o.lr);
      }
    }
  }
}

TEST(LrSchedule, ConstantStaysAtLr) {
  EXPECT_DOUBLE_EQ(learning_rate(opt("constant"), 500, 111), 1.0);
}

}  // namespace
}  // namespace rm

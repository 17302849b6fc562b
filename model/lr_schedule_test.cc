#include "model/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(LrSchedule, ConstantStaysAtLr) {
  EXPECT_DOUBLE_EQ(learning_rate(opt("constant"), 500, 111), 1.0);
}

}  // namespace
}  // namespace rm

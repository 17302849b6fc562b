// process_age_s(): this test process's own age, read from /proc, moves with the clock.
#include "base/elapsed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace rm {
namespace {

TEST(Elapsed, ProcessAgeGrowsWithTheSteadyClock) {
  const double before = process_age_s();
  ASSERT_GE(before, 0) << "/proc/self/stat or /proc/uptime could not be read";
  EXPECT_LT(before, 600) << "this test process cannot have started more than 10 minutes ago";
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double slept = seconds_since(t0);
  const double grown = process_age_s() - before;
  // The kernel's start time is in clock ticks (10 ms); allow two either way.
  EXPECT_NEAR(grown, slept, 0.03);
}

}  // namespace
}  // namespace rm

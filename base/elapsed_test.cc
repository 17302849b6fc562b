// process_age_s(): this test process's own age, read from /proc, moves with the clock.
#include "base/elapsed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace rm {
namespace {

TEST(Elapsed, ProcessAgeGrowsWithTheSteadyClock) {
  // The two ages are read inside [outer] and around [inner] the steady clock's readings, so a
  // pause anywhere (a loaded machine) widens the bounds instead of failing the test.
  const auto outer0 = std::chrono::steady_clock::now();
  const double before = process_age_s();
  const auto inner0 = std::chrono::steady_clock::now();
  ASSERT_GE(before, 0) << "/proc/self/stat or /proc/uptime could not be read";
  EXPECT_LT(before, 600) << "this test process cannot have started more than 10 minutes ago";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double inner = seconds_since(inner0);
  const double after = process_age_s();
  const double outer = seconds_since(outer0);
  const double grown = after - before;
  // The kernel's start time and uptime are in clock ticks (10 ms); allow two either way.
  EXPECT_GE(grown, inner - 0.02);
  EXPECT_LE(grown, outer + 0.02);
}

}  // namespace
}  // namespace rm

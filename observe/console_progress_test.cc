// The progress line's arithmetic: percent, ETA from the median of recent steps, MFU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "observe/console_progress.h"

namespace rm {
namespace {

StepMetrics step(int64_t n, double ms) {
  StepMetrics m;
  m.step = n;
  m.loss = 2.5;
  m.tokens_per_s = 1000;
  m.step_ms = ms;
  return m;
}

TEST(ConsoleProgress, EtaIsTheMedianRecentStepTimesTheStepsLeft) {
  // 4e8 flops a step at 1e10 flop/s of sgemm: 40 ms of GEMM in a 100 ms step, MFU 40%.
  ConsoleProgress console(100, /*terminal=*/false, 4e8, 1e10);
  for (int i = 1; i <= 49; ++i)
    console.step(step(i, i == 45 ? 5000 : 100), false);  // one slow step: not the median
  const std::string line = console.progress_line(step(50, 100));
  EXPECT_NE(line.find("step     50/100  50.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("eta 5s"), std::string::npos) << "50 steps x 100 ms: " << line;
  EXPECT_NE(line.find("MFU 40%"), std::string::npos) << line;
  EXPECT_NE(line.find("loss 2.5000 | 1000 tok/s"), std::string::npos) << line;
}

TEST(ConsoleProgress, MfuAgainstThePeakBesideTheSgemmOne) {
  // 4e8 flops in 100 ms = 4 GFLOP/s: 40% of a 10 GFLOP/s sgemm, 8% of a 50 GFLOP/s peak.
  ConsoleProgress console(100, false, 4e8, 1e10, 5e10);
  console.step(step(1, 100), false);
  const std::string line = console.progress_line(step(2, 100));
  EXPECT_NE(line.find("MFU 40% of sgemm, 8% of peak"), std::string::npos) << line;
}

TEST(ConsoleProgress, NoMfuWithoutASgemmRate) {
  ConsoleProgress console(10, false, 4e8, 0);
  console.step(step(1, 100), false);
  EXPECT_EQ(console.progress_line(step(2, 100)).find("MFU"), std::string::npos);
}

TEST(ConsoleProgress, LongRunsShowHoursAndMinutes) {
  ConsoleProgress console(100000, false, 0, 0);
  console.step(step(1, 1000), false);
  // 99998 steps of a second left: 27h46m.
  EXPECT_NE(console.progress_line(step(2, 1000)).find("eta 27h46m"), std::string::npos);
}

// Durations out of range (a hostile metrics line's step_ms: `status`'s eta) are bounded before
// the conversion to whole seconds, which was undefined past long long (UBSan flags it).
TEST(ConsoleProgress, DurationsOutOfRangeAreBounded) {
  EXPECT_EQ(duration_text(1e300), "100000h00m");
  EXPECT_EQ(duration_text(std::numeric_limits<double>::infinity()), "100000h00m");
  EXPECT_EQ(duration_text(std::nan("")), "0s");
  EXPECT_EQ(duration_text(-5), "0s");
  EXPECT_EQ(duration_text(61), "1m01s");
}

// A diverging run's numbers can be long: the lines are cut to their buffers, never read past.
TEST(ConsoleProgress, HugeNumbersAreCutNotOverrun) {
  ConsoleProgress console(10, false, 4e8, 1e10);
  StepMetrics m = step(1, 100);
  m.loss = 1e300;  // %.4f: 301 digits and more
  m.grad_norm = 1e300;
  console.step(m, false);
  const std::string line = console.progress_line(m);
  EXPECT_LT(line.size(), 2 * 256u);  // the clamped head (one 256-byte buffer) and the MFU part
  EXPECT_EQ(line.rfind("step      1/10", 0), 0u) << line;
  const std::string log = format_log_line(m, 10);
  EXPECT_LT(log.size(), 256u);
  EXPECT_EQ(log.rfind("step      1/10 | loss 1000000", 0), 0u) << log;
}

}  // namespace
}  // namespace rm

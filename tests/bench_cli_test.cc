// `ringmaster bench train` and `bench allreduce` through the real binary, at tiny sizes: the
// figures they print agree with each other and follow the stated conventions. No timing is
// asserted: the figures depend on the machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

using test::run_cli;

const char* const kQuiet = "env OMPI_MCA_mpi_yield_when_idle=1 OMP_WAIT_POLICY=passive";

double number(const std::smatch& m, int i) {
  return std::stod(m[i].str());
}

// The bench prints its figures to one decimal, so a figure recomputed from printed ones is only
// known within the interval their rounding allows: [lo, hi] for a printed value x is x -/+ 0.05.
struct Bounds {
  double lo, hi;
};
Bounds printed(double x) {
  return {x - 0.05, x + 0.05};
}
// 100 * |a - b| / min(a, b) over every a, b the printed values could have come from.
Bounds percent_apart(double a, double b) {
  const double big = std::max(a, b), small = std::min(a, b);
  const Bounds bg = printed(big), sm = printed(small);
  const double most = 100.0 * (bg.hi / sm.lo - 1.0);
  const double least = std::max(0.0, 100.0 * (bg.lo / sm.hi - 1.0));
  return {least, most};
}
// 100 * a / b over every a, b the printed values could have come from.
Bounds percent_of(double a, double b) {
  return {100.0 * printed(a).lo / printed(b).hi, 100.0 * printed(a).hi / printed(b).lo};
}
// A printed percentage (one decimal) within the bounds the printed inputs allow.
void expect_within(double shown, Bounds b, const std::string& out) {
  EXPECT_GE(shown, b.lo - 0.051) << out;
  EXPECT_LE(shown, b.hi + 0.051) << out;
}

// The sgemm baseline is timed before and after the steps (a shared machine's load can change in
// between), and MFU is measured against the faster; both are printed, and MFU vs sgemm is the
// step's rate over that one.
TEST(BenchTrainCli, MfuIsMeasuredAgainstTheFasterOfTheBaselinesTimedBeforeAndAfterTheSteps) {
  TempDir dir;
  const auto r = run_cli(
      "bench train configs/shakespeare.yaml --steps 2 --warmup 1 --set model.layers=1 "
      "--set model.width=64 --set model.heads=2 --set model.seq_len=32",
      dir.path(), kQuiet);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string num = "([0-9]+\\.[0-9]+)";
  std::smatch base;
  ASSERT_TRUE(std::regex_search(
      r.out, base,
      std::regex("sgemm at these shapes: " + num + " GFLOP/s per rank \\(" + num +
                 " ms of GEMM per step\\), the faster of " + num + " before the steps and " + num +
                 " after them \\(" + num + "% apart\\)")))
      << r.out;
  const double used = number(base, 1), before = number(base, 3), after = number(base, 4);
  EXPECT_NEAR(used, std::max(before, after), 0.051) << r.out;
  // CI's ASan run printed 6.9 and 8.5 and "22.9% apart": 23.2% from the rounded figures.
  expect_within(number(base, 5), percent_apart(before, after), r.out);
  std::smatch step;
  ASSERT_TRUE(std::regex_search(
      r.out, step, std::regex(num + " GFLOP/s per rank \\| MFU vs sgemm " + num + "%")))
      << r.out;
  const double rank_rate = number(step, 1), mfu = number(step, 2);
  expect_within(mfu, percent_of(rank_rate, used), r.out);
  // Above 100% the figure is called what it then is: a baseline slowed by the machine's load.
  // (Judged on the printed MFU itself: rates that print alike may still differ.)
  const bool noted = r.out.find("note: MFU vs sgemm above 100%") != std::string::npos;
  if (std::abs(mfu - 100.0) > 0.05) {
    EXPECT_EQ(noted, mfu > 100.0) << r.out;
  }
}

// With one rank, bus bandwidth is 0 as in nccl-tests (no byte crosses a link); the ratio
// column still compares the implementations, by algbw.
TEST(BenchAllreduceCli, OneRankHasNoBusBandwidthButItsRatiosStillCompare) {
  TempDir dir;
  const auto r = run_cli("bench allreduce --np 1 --max-mb 1 --seconds 0.02", dir.path(), kQuiet);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# one rank: busbw is 0"), std::string::npos) << r.out;
  // A row: size, count, type, redop, then per implementation time, algbw, busbw, #wrong, and
  // the ratios. The first implementation's busbw is 0 and its ratio is algbw over the last's.
  const std::string num = "([0-9]+\\.[0-9]+)";
  std::smatch row;
  ASSERT_TRUE(
      std::regex_search(r.out, row,
                        std::regex("\n +1048576 +262144 +float +sum +" + num + " +" + num + " +" +
                                   num + " +0 +" + num + " +" + num + " +" + num + " +0 +" + num +
                                   " +" + num + " +" + num + " +0 +" + num + "x")))
      << r.out;
  EXPECT_EQ(number(row, 3), 0.0) << r.out;
  EXPECT_EQ(number(row, 9), 0.0) << r.out;
  EXPECT_GT(number(row, 2), 0.0) << r.out;
  // algbw and the ratio print two decimals: the ratio of the printed algbws is only known within
  // what that rounding allows (wide where a slow run prints an algbw of a few hundredths).
  const double a = number(row, 2), b = number(row, 8), ratio = number(row, 10);
  ASSERT_GT(b, 0.005) << r.out;
  EXPECT_GE(ratio, (a - 0.005) / (b + 0.005) - 0.0051) << r.out;
  EXPECT_LE(ratio, (a + 0.005) / (b - 0.005) + 0.0051) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rm

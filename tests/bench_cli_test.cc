// `ringmaster bench train` and `bench allreduce` through the real binary, at tiny sizes: the
// figures they print agree with each other and follow the stated conventions. No timing is
// asserted: the figures depend on the machine.
#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_NEAR(number(base, 5), 100.0 * std::abs(after - before) / std::min(after, before), 0.2)
      << r.out;
  std::smatch step;
  ASSERT_TRUE(std::regex_search(
      r.out, step, std::regex(num + " GFLOP/s per rank \\| MFU vs sgemm " + num + "%")))
      << r.out;
  const double rank_rate = number(step, 1), mfu = number(step, 2);
  EXPECT_NEAR(mfu, 100.0 * rank_rate / used, 0.1 + 0.01 * mfu) << r.out;
  // Above 100% the figure is called what it then is: a baseline slowed by the machine's load.
  const bool noted = r.out.find("note: MFU vs sgemm above 100%") != std::string::npos;
  EXPECT_EQ(noted, rank_rate > used) << r.out;
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
  EXPECT_NEAR(number(row, 10), number(row, 2) / number(row, 8), 0.011 + 0.05 * number(row, 10))
      << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rm

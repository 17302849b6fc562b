// Exit codes as `run` reads and passes them on (base/exit_codes.h).
#include "base/exit_codes.h"

#include <gtest/gtest.h>

namespace rm {
namespace {

TEST(ExitCodes, OnlyCodesOfASignalNameOne) {
  EXPECT_EQ(signal_in_exit_code(137), "SIGKILL");
  EXPECT_EQ(signal_in_exit_code(143), "SIGTERM");
  EXPECT_EQ(signal_in_exit_code(139), "SIGSEGV");
  // mpirun's own failure is 255: 128 + 127 is no signal (before: "killed by signal 127").
  EXPECT_EQ(signal_in_exit_code(255), "");
  EXPECT_EQ(signal_in_exit_code(128), "");
  EXPECT_EQ(signal_in_exit_code(1), "");
  EXPECT_EQ(signal_in_exit_code(-1), "");
}

TEST(ExitCodes, RunPassesOnItsOwnCodesAndSignalsAndCallsTheRestAFailure) {
  for (const int code : {0, 1, 2, 75, 137, 143}) EXPECT_EQ(documented_exit_code(code), code);
  for (const int code : {255, 3, 100, 128, 127, -1}) {
    EXPECT_EQ(documented_exit_code(code), kExitFailure) << code;
  }
}

}  // namespace
}  // namespace rm

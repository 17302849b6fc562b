// A test program for scripts/gtest-by-suite.sh (gtest_by_suite_test.sh): one suite of each
// outcome the script reports -- passing (plain, typed, value-parameterized), failing, skipping,
// one that dies by a signal mid-suite (as a GPU test does on a sticky CUDA error) and one that
// hangs. Not a test of its own.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

TEST(Passing, One) {
  EXPECT_EQ(1 + 1, 2);
}
TEST(Passing, Two) {
  EXPECT_TRUE(true);
}

TEST(Failing, Fails) {
  EXPECT_EQ(1, 2) << "on purpose";
}
TEST(Failing, Passes) {
  EXPECT_EQ(1, 1);
}

TEST(Dying, ByASignal) {
  std::raise(SIGABRT);
}
TEST(Dying, NeverReached) {}

TEST(Skipping, Skips) {
  GTEST_SKIP() << "on purpose";
}

template <typename T>
class TypedPassing : public ::testing::Test {};
using Types = ::testing::Types<int, float>;
TYPED_TEST_SUITE(TypedPassing, Types);
TYPED_TEST(TypedPassing, Works) {
  EXPECT_EQ(TypeParam(2) * TypeParam(2), TypeParam(4));
}

class ValuePassing : public ::testing::TestWithParam<int> {};
TEST_P(ValuePassing, IsPositive) {
  EXPECT_GT(GetParam(), 0);
}
INSTANTIATE_TEST_SUITE_P(Values, ValuePassing, ::testing::Values(1, 2, 3));

TEST(Hanging, Sleeps) {
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

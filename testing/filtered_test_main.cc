// main() for GoogleTest programs that ctest runs piecewise with --gtest_filter: the tests, and a
// failure when the filter matches none. GoogleTest 1.12 (Debian 12's) exits 0 having run nothing,
// so a renamed test would leave its ctest entry green.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  // The filter is applied as the tests run: counted after them. A listing runs none.
  if (!GTEST_FLAG_GET(list_tests) && testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::fprintf(stderr, "no test matches the filter: nothing ran\n");
    return 1;
  }
  return failed;
}

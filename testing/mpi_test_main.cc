// main() for the multi-rank GoogleTest binaries: MPI_Init, the tests, MPI_Finalize. Rank 0
// prints the usual output; other ranks print only their failures, prefixed with their rank. The
// exit code is non-zero on every rank if any rank failed, if no test was to run (ctest runs
// these with --gtest_filter, and GoogleTest 1.12 passes a filter that matches nothing: a test
// renamed would leave its entry green having run nothing), or if every test to run skipped (a
// GTEST_SKIP inside mpirun reads as a pass to ctest, which sees only the exit code; an entry whose
// tests may all skip -- NCCL's, without a GPU -- says so with SKIP_REGULAR_EXPRESSION, which
// marks it skipped whatever the exit code).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "base/lsan_mpi_program.h"  // LeakSanitizer and Open MPI (ASan builds only)

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // The filter is applied as the tests run: counted after them. A listing runs none.
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  if (!GTEST_FLAG_GET(list_tests) && unit.test_to_run_count() == 0) {
    if (rank == 0) std::fprintf(stderr, "no test matches the filter: nothing ran\n");
    failed = 1;
  } else if (!GTEST_FLAG_GET(list_tests) && unit.skipped_test_count() == unit.test_to_run_count()) {
    if (rank == 0) std::fprintf(stderr, "every test skipped: nothing was checked\n");
    failed = 1;
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}

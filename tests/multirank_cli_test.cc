// Multi-rank jobs through the real binary: `run --nproc N` trains and agrees with one rank, and
// a rank that stalls or dies makes the job fail within parallel.timeout_s plus a few seconds,
// naming the operation and its sequence number: never a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

using test::run_cli;
using Clock = std::chrono::steady_clock;

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: ranks
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 6, eval_batches: 2, log_every: 1}
parallel: {timeout_s: 4}
)");
}

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

TEST(MultiRankCli, TwoRanksTrainLikeOne) {
  TempDir dir;
  const std::string job = job_file(dir);
  const auto one = run_cli("run " + job + " --set run_dir=" + dir.file("one"), dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // A healthy run: the 4 s timeout, there for the fault tests below, could otherwise end it at
  // its last barrier while rank 0 still writes the final weights on a loaded machine.
  const auto two = run_cli(
      "run " + job + " --nproc 2 --set parallel.shard=optimizer --set parallel.timeout_s=60",
      dir.path());
  ASSERT_EQ(two.exit_code, 0) << two.err << two.out;
  EXPECT_NE(two.out.find("2 ranks"), std::string::npos) << two.out;
  const auto a = losses(dir.file("one/metrics.jsonl")), b = losses(dir.file("run/metrics.jsonl"));
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u) << "only rank 0 writes metrics";
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * a[i]) << "step " << i + 1;
  // The weights of the 2-rank run are usable by the single-process commands.
  const auto s = run_cli("sample " + dir.file("run") + " --tokens 20", dir.path());
  EXPECT_EQ(s.exit_code, 0) << s.err;
}

TEST(MultiRankCli, BatchArithmeticIsCheckedForTheRankCount) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir) + " --nproc 3", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("train.global_batch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ranks (3)"), std::string::npos) << r.err;
}


class RankFault : public testing::TestWithParam<const char*> {};

TEST_P(RankFault, OthersFailWithinTheTimeout) {
  TempDir dir;
  const std::string fault = GetParam();
  const auto t0 = Clock::now();
  const auto r = run_cli("run " + job_file(dir) + " --nproc 2",  dir.path(),
                         "RM_TEST_FAULT=" + fault + ":1:3");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(seconds, 4 + 20) << "timeout_s is 4";
  if (fault != "kill") {
    // The surviving rank names the collective and its sequence number.
    EXPECT_NE(r.err.find("seq="), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, RankFault, testing::Values("stop", "sleep", "kill"));

// A plain error of one rank's while the steps run (out of memory, a failed kernel: not bad input
// nor I/O) ends the job at once with its cause and exit 1, which a restart may get past. Without
// rank_main's abort with the cause, the rank's unwinding poisoned the communicator and the other
// rank, waiting in a collective, aborted the job before the cause was printed; a wait for the
// timeout (60 s here) would be as bad.
TEST(MultiRankCli, AnErrorOfOneRankEndsTheJobAtOnceWithItsCause) {
  for (const char* shard : {"none", "gradients"}) {
    TempDir dir;
    const auto t0 = Clock::now();
    const auto r = run_cli("run " + job_file(dir) + " --nproc 2 --set parallel.timeout_s=60" +
                               " --set parallel.shard=" + shard,
                           dir.path(), "RM_TEST_FAULT=throw:1:3");
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 1) << shard << r.err;
    EXPECT_LT(seconds, 30) << shard << ": the job waited for its timeout";
    EXPECT_NE(r.err.find("an error of rank 1's at step 3 (RM_TEST_FAULT)"), std::string::npos)
        << shard << r.err;
    EXPECT_EQ(r.err.find("timed out"), std::string::npos) << shard << r.err;
  }
}

// A rank whose compute backend fails to start (a GPU out of memory, lost or taken) ends the job
// at once, the other ranks naming it: they agree on their backends before the first
// communicator is made. Before, they waited for it in that communicator's MPI_Comm_dup, a
// collective with no deadline, until the failed rank's MPI_Finalize gave up (120 s).
TEST(MultiRankCli, ARankWhoseBackendFailsToStartEndsTheJobAtOnce) {
  TempDir dir;
  const auto t0 = Clock::now();
  const auto r =
      run_cli("run " + job_file(dir) + " --nproc 2", dir.path(), "RM_TEST_FAULT=devfail:1:0");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(seconds, 60) << "the ranks waited for the failed one";
  EXPECT_NE(r.err.find("[rank 1] rank 1's compute backend failed to start (RM_TEST_FAULT)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("[rank 0] rank 1 could not start its cpu backend: rank 1's "
                       "compute backend failed to start"),
            std::string::npos)
      << r.err;
}

// Before any communicator exists, the ranks agree (their checks, the backend, the resume) over
// plain MPI; a rank stuck there still ends the job within the start-up timeout, naming the step.
TEST(MultiRankCli, ARankStuckAtStartUpEndsTheJobWithinTheTimeout) {
  TempDir dir;
  const auto t0 = Clock::now();
  const auto r = run_cli("run " + job_file(dir) + " --nproc 2", dir.path(),
                         "RM_TEST_FAULT=stop:1:0 RM_STARTUP_TIMEOUT_S=3");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(seconds, 3 + 20);
  EXPECT_NE(r.err.find("[rank 0/2] start-up (every rank's checks): timed out after"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace rm

// first_rank_ended(): only markers of the asked token count (a late rank of an earlier attempt or
// run writes another), the lowest such rank is named, and names that only look like a marker are
// not read. rank_end_token(): the supervisor's pid and host and the attempt, nothing without one.
#include "base/rank_end.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/temp_dir.h"

namespace rm {
namespace {

class RankEnd : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_.file("logs")); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.file("logs/" + name)) << text;
  }
  std::string run_dir() const { return dir_.path(); }
  testutil::TempDir dir_;
};

TEST_F(RankEnd, OnlyThisAttemptsMarkersCountAndTheLowestRankIsNamed) {
  const std::string mine = "4711 h0 attempt 2\n";
  EXPECT_EQ(first_rank_ended(run_dir(), mine), -1);
  write("rank-1.ended", "4711 h0 attempt 1\n");  // the attempt before
  write("rank-0.ended", "999 h0 attempt 2\n");   // another supervisor's
  write("rank-3.log.ended", mine);               // not a marker's name
  write("rank-x.ended", mine);
  write("rank-2.log", mine);
  EXPECT_EQ(first_rank_ended(run_dir(), mine), -1);
  write("rank-7.ended", mine);
  EXPECT_EQ(first_rank_ended(run_dir(), mine), 7);
  write("rank-5.ended", mine);
  EXPECT_EQ(first_rank_ended(run_dir(), mine), 5);
  write("rank-4.ended", mine.substr(0, 5));  // being written: not yet
  EXPECT_EQ(first_rank_ended(run_dir(), mine), 5);
  EXPECT_EQ(first_rank_ended(run_dir(), ""), -1) << "no supervisor: nothing is looked for";
  EXPECT_EQ(rank_end_marker_path(run_dir(), 12), run_dir() + "/logs/rank-12.ended");
}

TEST_F(RankEnd, TheTokenNamesTheSupervisorAndTheAttempt) {
  ::unsetenv("RM_RUN_LOCK");
  EXPECT_EQ(rank_end_token(), "");
  ::setenv("RM_RUN_LOCK", "4711 node-3 /runs/a b", 1);
  ::setenv("RM_RESTART_COUNT", "2", 1);
  EXPECT_EQ(rank_end_token(), "4711 node-3 attempt 2\n");
  ::unsetenv("RM_RESTART_COUNT");
  EXPECT_EQ(rank_end_token(), "4711 node-3 attempt 0\n");
  ::unsetenv("RM_RUN_LOCK");
}

}  // namespace
}  // namespace rm

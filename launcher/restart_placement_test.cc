// Where a restart goes without lost hosts: spare slots first, then a shrink only when asked and
// only to a rank count the batch arithmetic allows.
#include "launcher/restart_placement.h"

#include <gtest/gtest.h>

namespace rm {
namespace {

JobConfig job_with(int global_batch, int micro_batch, bool shrink) {
  JobConfig job;
  job.train.global_batch = global_batch;
  job.train.micro_batch = micro_batch;
  job.resilience.shrink = shrink;
  return job;
}

const std::vector<HostSlots> kThreeHosts = {{"a", 2}, {"b", 2}, {"c", 2}};

TEST(RestartPlacement, SpareSlotsTakeTheLostHostsRanksWithoutShrinking) {
  const RestartPlacement p = place_without(job_with(16, 4, false), kThreeHosts, 4, {"b"});
  EXPECT_EQ(p.nproc, 4);
  ASSERT_EQ(p.hosts.size(), 2u);
  EXPECT_EQ(p.hosts[0].host, "a");
  EXPECT_EQ(p.hosts[1].host, "c");
  EXPECT_EQ(hostfile_text(p.hosts), "a slots=2\nc slots=2\n");
}

TEST(RestartPlacement, WithoutShrinkTooFewSlotsMeansWaiting) {
  const RestartPlacement p = place_without(job_with(24, 4, false), kThreeHosts, 6, {"c"});
  EXPECT_EQ(p.nproc, 0);
  EXPECT_EQ(p.why, "the 2 hosts left, 4 slots, for 6 ranks (resilience.shrink: false)");
}

TEST(RestartPlacement, ShrinksToTheMostRanksTheBatchAllows) {
  // 24 = 4 x 6: 4 slots left, but 24 is not a multiple of 4 x 4 = 16; 3 ranks work.
  const RestartPlacement p = place_without(job_with(24, 4, true), kThreeHosts, 6, {"c"});
  EXPECT_EQ(p.nproc, 3);
  EXPECT_EQ(p.why,
            "shrunk from 6 to 3 ranks on the 2 hosts left, 4 slots (the most that "
            "train.global_batch allows)");
  const RestartPlacement q = place_without(job_with(16, 4, true), {{"a", 2}, {"b", 2}}, 4, {"b"});
  EXPECT_EQ(q.nproc, 2);
  EXPECT_EQ(q.why, "shrunk from 4 to 2 ranks on the 1 host left, 2 slots");
}

TEST(RestartPlacement, SaysWhyWhenNoRankCountFitsTheBatch) {
  // 12 = 6 x 2: with 1 slot left, 1 rank would need 12 % 6 == 0 -- it fits; with micro 5 none.
  const RestartPlacement p = place_without(job_with(10, 5, true), {{"a", 1}, {"b", 1}}, 2, {"a"});
  EXPECT_EQ(p.nproc, 1);
  const RestartPlacement q = place_without(job_with(12, 5, true), {{"a", 1}, {"b", 1}}, 2, {"a"});
  EXPECT_EQ(q.nproc, 0);
  EXPECT_EQ(q.why,
            "train.global_batch (12) is not a multiple of micro_batch (5) x ranks for any rank "
            "count the 1 host left, 1 slot hold");
  const RestartPlacement none = place_without(job_with(16, 4, true), {{"a", 2}}, 2, {"a"});
  EXPECT_EQ(none.nproc, 0);
  EXPECT_EQ(none.why, "no host is left");
}

}  // namespace
}  // namespace rm

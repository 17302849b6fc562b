// replica_ring (replica_ring.h): every rank's replica is kept on another host, each rank keeps
// exactly one, and layouts without a ring say why.
#include "worker/replica_ring.h"

#include <gtest/gtest.h>

#include <vector>

namespace rm {
namespace {

TEST(ReplicaRing, EachRanksSliceGoesToTheSamePlaceOnTheNextHost) {
  // Hosts 0, 1, 2 with 2 ranks each, laid out host after host.
  const ReplicaRing ring = replica_ring({0, 0, 1, 1, 2, 2});
  ASSERT_TRUE(ring.on()) << ring.why_none;
  EXPECT_EQ(ring.keeper, (std::vector<int>{2, 3, 4, 5, 0, 1}));
  EXPECT_EQ(ring.kept_by(0), 4);
  EXPECT_EQ(ring.kept_by(3), 1);
}

TEST(ReplicaRing, RanksInterleavedAcrossHostsStillLandOnAnotherHost) {
  // Round-robin placement: ranks 0, 2 on host 0; 1, 3 on host 1.
  const std::vector<int> host = {0, 1, 0, 1};
  const ReplicaRing ring = replica_ring(host);
  ASSERT_TRUE(ring.on());
  std::vector<int> kept(host.size(), 0);
  for (size_t r = 0; r < host.size(); ++r) {
    const int k = ring.keeper[r];
    EXPECT_NE(host[static_cast<size_t>(k)], host[r]) << "rank " << r << " kept on its own host";
    ++kept[static_cast<size_t>(k)];
    EXPECT_EQ(ring.kept_by(k), static_cast<int>(r));
  }
  EXPECT_EQ(kept, (std::vector<int>{1, 1, 1, 1}));
}

TEST(ReplicaRing, OneHostOrUnevenHostsHaveNoRingAndSayWhy) {
  const ReplicaRing one = replica_ring({0, 0, 0});
  EXPECT_FALSE(one.on());
  EXPECT_NE(one.why_none.find("one host"), std::string::npos) << one.why_none;
  EXPECT_EQ(one.kept_by(0), -1);
  const ReplicaRing uneven = replica_ring({0, 0, 1});
  EXPECT_FALSE(uneven.on());
  EXPECT_NE(uneven.why_none.find("different numbers"), std::string::npos) << uneven.why_none;
}

}  // namespace
}  // namespace rm

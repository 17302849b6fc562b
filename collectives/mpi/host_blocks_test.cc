// The hierarchical path's layout test (host_blocks.h), on the views the ranks of real layouts
// would report.
#include "collectives/mpi/host_blocks.h"

#include <gtest/gtest.h>

#include <vector>

namespace rm::detail {
namespace {

// The views of hosts holding `sizes` ranks each, in rank order (block placement).
std::vector<LocalView> blocks(const std::vector<int>& sizes) {
  std::vector<LocalView> views;
  for (int n : sizes) {
    for (int i = 0; i < n; ++i) views.push_back({i, n});
  }
  return views;
}

TEST(HostBlocks, EqualHostsInBlocksTakeTheRails) {
  EXPECT_TRUE(hosts_in_equal_blocks(blocks({2, 2})));
  EXPECT_TRUE(hosts_in_equal_blocks(blocks({2, 2, 2})));
  EXPECT_TRUE(hosts_in_equal_blocks(blocks({4, 4})));
}

// Hosts of 2, 2 and 4 ranks: each rank's own view is consistent (its local index is its rank
// modulo its host's size, and 8 is a multiple of both), but host 2's four ranks would take
// host index 1 and the rails {0,2,4}, {1,3,5}, {6}, {7} would exchange 2- and 4-entry count
// vectors: wrong sums or a hang. Before, each rank checked only its own view.
TEST(HostBlocks, HostsOfDifferentSizesAreRefused) {
  EXPECT_FALSE(hosts_in_equal_blocks(blocks({2, 2, 4})));
  EXPECT_FALSE(hosts_in_equal_blocks(blocks({4, 2, 2})));
  EXPECT_FALSE(hosts_in_equal_blocks(blocks({3, 3, 2})));
}

TEST(HostBlocks, OneHostOneRankPerHostOrRanksOutOfOrderAreRefused) {
  EXPECT_FALSE(hosts_in_equal_blocks(blocks({4})));        // one host: shared memory only
  EXPECT_FALSE(hosts_in_equal_blocks(blocks({1, 1, 1})));  // one per host: plain MPI
  EXPECT_FALSE(hosts_in_equal_blocks({}));
  // Round-robin placement: ranks 0 and 2 on one host, 1 and 3 on the other.
  EXPECT_FALSE(hosts_in_equal_blocks({{0, 2}, {0, 2}, {1, 2}, {1, 2}}));
}

}  // namespace
}  // namespace rm::detail

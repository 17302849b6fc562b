// Whether ranks lie host after host, the same number on each -- the layout the hierarchical
// path's rails need (hier_path.h): ranks h*L .. h*L+L-1 on host h, L ranks on every host.
// A pure function of every rank's view, so that ranks which all-gather their views first agree.
#pragma once

#include <vector>

namespace rm::detail {

struct LocalView {
  int local = 0;       // the rank's index among the ranks of its host
  int local_size = 1;  // the ranks on its host
};

// `views[r]` is rank r's. True when every host holds the same number L of ranks, 1 < L < the
// rank count, and rank r is local rank r % L of its host. Hosts of different sizes are refused
// even where each rank's own view looks right (2, 2 and 4 ranks: every rank's local index is
// rank % its host's size, yet the rails would not line up).
bool hosts_in_equal_blocks(const std::vector<LocalView>& views);

}  // namespace rm::detail

#include "collectives/mpi/host_blocks.h"

namespace rm::detail {

bool hosts_in_equal_blocks(const std::vector<LocalView>& views) {
  const int size = static_cast<int>(views.size());
  if (size < 2) return false;
  const int per_host = views[0].local_size;
  if (per_host <= 1 || per_host >= size || size % per_host != 0) return false;
  for (int r = 0; r < size; ++r) {
    if (views[r].local_size != per_host || views[r].local != r % per_host) return false;
  }
  return true;
}

}  // namespace rm::detail

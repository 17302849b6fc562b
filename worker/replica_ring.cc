#include "worker/replica_ring.h"

#include <map>

namespace rm {

int ReplicaRing::kept_by(int rank) const {
  for (size_t r = 0; r < keeper.size(); ++r) {
    if (keeper[r] == rank) return static_cast<int>(r);
  }
  return -1;
}

ReplicaRing replica_ring(const std::vector<int>& host_of_rank) {
  ReplicaRing ring;
  std::map<int, std::vector<int>> ranks_of_host;  // host -> its ranks, in rank order
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    ranks_of_host[host_of_rank[r]].push_back(static_cast<int>(r));
  }
  if (ranks_of_host.size() < 2) {
    ring.why_none = "one host: no other host to keep a replica";
    return ring;
  }
  const size_t per_host = ranks_of_host.begin()->second.size();
  for (const auto& [host, ranks] : ranks_of_host) {
    if (ranks.size() != per_host) {
      ring.why_none = "hosts run different numbers of ranks (" + std::to_string(per_host) +
                      " and " + std::to_string(ranks.size()) + ")";
      return ring;
    }
  }
  std::vector<const std::vector<int>*> hosts;
  for (const auto& entry : ranks_of_host) hosts.push_back(&entry.second);
  ring.keeper.assign(host_of_rank.size(), -1);
  for (size_t h = 0; h < hosts.size(); ++h) {
    const std::vector<int>& next = *hosts[(h + 1) % hosts.size()];
    for (size_t k = 0; k < per_host; ++k) ring.keeper[(*hosts[h])[k]] = next[k];
  }
  return ring;
}

}  // namespace rm

// Which rank keeps whose in-memory checkpoint replica (worker/memory_checkpoints.h): a ring over
// hosts. Hosts are taken in the order of their first rank; rank r, the k-th rank of its host,
// sends its slice to the k-th rank of the next host and keeps the slice of the k-th rank of the
// previous one. So a lost host's slices all live on the next host, and every rank sends and
// keeps exactly one (the same bytes a rank sends, it receives: the work is even).
#pragma once

#include <string>
#include <vector>

namespace rm {

struct ReplicaRing {
  // keeper[r]: the rank that keeps rank r's replica. Empty when there are no replicas, and
  // `why_none` says why (one host; hosts with different numbers of ranks).
  std::vector<int> keeper;
  std::string why_none;

  bool on() const { return !keeper.empty(); }
  // The rank whose replica `rank` keeps (-1 when off).
  int kept_by(int rank) const;
};

// host_of_rank[r]: rank r's host, numbered in the order of each host's first rank.
ReplicaRing replica_ring(const std::vector<int>& host_of_rank);

}  // namespace rm

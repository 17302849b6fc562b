#include "launcher/node_memory.h"

#include <algorithm>
#include <cstdlib>

#include "configs/slurm_memory.h"

namespace rm {

MemoryCapacity slurm_node_capacity(const ClusterConfig& cluster, const SlurmPartitions& nodes) {
  MemoryCapacity c;
  c.slurm = true;
  const char* environment = std::getenv("SBATCH_MEM_PER_NODE");
  if (environment != nullptr && *environment != '\0') {
    // A size sbatch cannot read it refuses itself: not checked here.
    c.host = std::max(parse_slurm_memory(environment), 0.0);
    c.host_name =
        std::string("a node (SBATCH_MEM_PER_NODE=") + environment + " in the environment)";
    return c;
  }
  if (!cluster.memory_per_node.empty()) {
    c.host = parse_slurm_memory(cluster.memory_per_node);
    c.host_name = "a node (cluster.memory_per_node: " + cluster.memory_per_node + ")";
    return c;
  }
  std::string from_environment, described;
  c.host = smallest_node_memory(nodes, submitted_partition(cluster, &from_environment), &described);
  c.host_name = "the smallest node of " + described +
                (from_environment.empty() ? "" : " (" + from_environment + ")") + " (sinfo)";
  return c;
}

}  // namespace rm

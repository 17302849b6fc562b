#include "launcher/node_memory.h"

#include <algorithm>
#include <cstdlib>

#include "configs/slurm_memory.h"

namespace rm {

MemoryCapacity slurm_node_capacity(const ClusterConfig& cluster, const SlurmPartitions& nodes) {
  MemoryCapacity c;
  c.slurm = true;
  // Dropped by sbatch when sbatch_extra asks for memory a CPU or a GPU; 0 is the whole node,
  // as without it.
  const char* environment = std::getenv("SBATCH_MEM_PER_NODE");
  const double asked = environment != nullptr ? parse_slurm_memory(environment) : 0;
  if (environment != nullptr && !sbatch_extra_sets_memory(cluster.sbatch_extra) && asked != 0) {
    // A size not read here (sbatch also takes "64GB") is not checked.
    c.host = std::max(asked, 0.0);
    c.host_name =
        std::string("a node (SBATCH_MEM_PER_NODE=") + environment + " in the environment)";
    return c;
  }
  // 0: all of each node's memory (--mem=0), judged by the smallest node as without it.
  const double per_node =
      cluster.memory_per_node.empty() ? 0 : parse_slurm_memory(cluster.memory_per_node);
  if (per_node != 0) {
    c.host = per_node;
    c.host_name = "a node (cluster.memory_per_node: " + cluster.memory_per_node + ")";
    return c;
  }
  // The smallest node bounds the job only where it may land on any node of the partition: not
  // where the job may go to another cluster or is placed otherwise (slurm_nodes.h), nor where it
  // is kept to some of the nodes (their smallest may be larger).
  if (sbatch_extra_reshapes(cluster.sbatch_extra) || !sbatch_environment_override().empty() ||
      sbatch_extra_narrows_nodes(cluster.sbatch_extra)) {
    return c;
  }
  std::string from_environment, described;
  c.host = smallest_node_memory(nodes, submitted_partition(cluster, &from_environment), &described);
  c.host_name = "the smallest node of " + described + " (sinfo" +
                (from_environment.empty() ? "" : "; " + from_environment + " in the environment") +
                ")";
  return c;
}

}  // namespace rm

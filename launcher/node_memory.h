// What memory a Slurm node gives a job's ranks, for `submit`'s memory check (memory_fit.h).
// In the order sbatch takes them: SBATCH_MEM_PER_NODE from the environment (sbatch lets it win
// over the script's --mem line, but drops it for an sbatch_extra `--mem-per-cpu`/`--mem-per-gpu`,
// and 0 is the whole node), cluster.memory_per_node (the script's `--mem`), else the smallest
// RealMemory among the nodes of the partition the job goes to (slurm_nodes.h:
// submitted_partition(), all of a comma list, the default partition's when none is named: not
// every partition's, since a small-memory debug partition beside the default one refused jobs
// that fit the default's nodes). Unknown (host = 0, not checked) when none says: no sinfo here,
// it failed or did not answer in 10 s, the nodes declare no memory (Slurm's RealMemory default
// is 1 MB), no partition is named or marked default, or the job is not bound to land on any node
// of the partition (sbatch_extra or the environment sends it to another cluster, places it
// otherwise, or keeps it to some nodes: `--constraint`, `--nodelist`, `--exclude`).
#pragma once

#include "configs/job_config.h"
#include "launcher/slurm_nodes.h"
#include "planning/memory_fit.h"

namespace rm {

// `nodes`: query_slurm_partitions()'s answer (asked once for this and the shape check).
MemoryCapacity slurm_node_capacity(const ClusterConfig& cluster, const SlurmPartitions& nodes);

}  // namespace rm

// What memory a Slurm node gives a job's ranks, for `submit`'s memory check (memory_fit.h):
// cluster.memory_per_node when the job asks for it (it is also the job's `--mem`), else the
// smallest RealMemory among the nodes of the job's partition as `sinfo` reports it. Unknown (host
// = 0, not checked) when neither says: no sinfo here, it failed or did not answer in 10 s, or
// the nodes declare no memory (Slurm's RealMemory default is 1 MB).
#pragma once

#include "configs/job_config.h"
#include "planning/memory_fit.h"

namespace rm {

MemoryCapacity slurm_node_capacity(const ClusterConfig& cluster);

// The smallest of sinfo's `%m` column (megabytes per node; "64000+" when a group's nodes differ,
// which gives its smallest), in bytes; 0 when no line holds a figure above 1.
double smallest_node_memory(const std::string& sinfo_output);

}  // namespace rm

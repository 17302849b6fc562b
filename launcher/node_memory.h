// What memory a Slurm node gives a job's ranks, for `submit`'s memory check (memory_fit.h):
// cluster.memory_per_node when the job asks for it (it is also the job's `--mem`), else the
// smallest RealMemory among the nodes of the job's partition as `sinfo` reports it: of
// cluster.partition's (all of a list), or of the default partition when it is empty (not of
// every partition: a small-memory debug partition beside the default one refused jobs that fit
// the default's nodes; the cluster's when no partition is marked default). Unknown (host
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

// The `%m` column of `sinfo --format=%P|%m` lines: of the default partition's lines (sinfo marks
// it '*'; its name goes to *default_name) when `partition` is empty and one is marked, else of
// every line (sinfo was asked for `partition` alone).
std::string memory_of_partition(const std::string& sinfo_output, const std::string& partition,
                                std::string* default_name);

}  // namespace rm

// Whether a Slurm partition has the nodes a job asks for, for `submit`'s check before sbatch:
// cluster.nodes nodes, each with tasks_per_node x cpus_per_task CPUs and gpus_per_node GPUs.
//
// Why: Slurm takes some jobs no node of the partition can ever hold and keeps them pending
// for ever. On Slurm 22.05, `cluster.nodes: 3` on a 2-node partition waits with reason
// PartitionNodeLimit, and `cpus_per_task: 16` on 4-CPU nodes waits with PartitionConfig. sbatch
// refuses other shapes itself ("CPU count per node can not be satisfied"). A user who submits
// on Friday finds on Monday a job that never started. The check refuses every such shape at
// once, naming the key and what the partition has. Its messages take the same form whether or
// not sbatch would have refused.
//
// A refusal must never hit a job Slurm would run, so the check refuses only what no node of any
// partition the job may go to can hold, whatever the nodes' state (a down or busy node can come
// back), and passes whatever it cannot see:
//  - the partitions: cluster.partition's (sbatch takes a comma list: each is tried), or, when
//    it is empty, every partition sinfo lists (a site's job_submit plugin may route the job
//    away from the default one; the message names the default's limits);
//  - a partition with nodes sinfo does not list (FUTURE, or powered-down CLOUD nodes: slurmctld
//    hides them, but they count in its TotalNodes) is not judged;
//  - its limits: MaxNodes and MaxCPUsPerNode (scontrol show partition);
//  - not judged at all: an sbatch_extra option that changes where or how the job is placed
//    (`--gres`, `--overcommit`, `--clusters`, ...), an SBATCH_* or SLURM_CLUSTERS environment
//    variable that does (sbatch lets them override the script), a line of sinfo's it cannot
//    read, and a cluster where sinfo or scontrol is absent, fails, or does not answer in 10 s.
// Constraints in sbatch_extra (`--constraint=a100`) only narrow the nodes further, so a refusal
// stays right with them.
#pragma once

#include <string>
#include <vector>

#include "configs/job_config.h"

namespace rm {

struct SlurmNode {
  std::string name;
  int cpus = 0;  // sinfo's %c: CPUs Slurm schedules on the node
  int gpus = 0;  // GPUs in its generic resources (%G)
};

struct SlurmPartition {
  std::string name;
  bool is_default = false;
  std::vector<SlurmNode> nodes;  // as sinfo lists them, each once
  // From `scontrol show partition -o`; -1 = not known (the partition is then not judged).
  long long total_nodes = -1;        // TotalNodes: hidden nodes too
  long long max_nodes = -1;          // MaxNodes a job; -1 also for UNLIMITED
  long long max_cpus_per_node = -1;  // MaxCPUsPerNode; -1 also for UNLIMITED
};

// What sinfo and scontrol said: every partition, or nothing when a line could not be read.
struct SlurmPartitions {
  std::vector<SlurmPartition> all;
};

// Parses `sinfo --Node --noheader --format=%N|%P|%c|%G` (sinfo marks the default partition with
// '*'; with --Node each line is one node of one partition). Empty when any line is not of that
// form: a partial picture could refuse a job Slurm would run.
SlurmPartitions parse_sinfo_nodes(const std::string& sinfo_output);

// Adds TotalNodes, MaxNodes and MaxCPUsPerNode from `scontrol show partition -o` (one line a
// partition) to the partitions it names.
void add_partition_limits(SlurmPartitions& partitions, const std::string& scontrol_output);

// The GPUs in a %G field: the sum of the counts of its `gpu[:TYPE]:COUNT[(...)]` entries,
// e.g. "gpu:h100:8(S:0-1),shard:4" -> 8; "(null)" -> 0.
int gres_gpu_count(const std::string& gres);

// Whether cluster.sbatch_extra changes where or how the job is placed (`--gres`, `--gpus`,
// `--mincpus`, `--overcommit`, `--clusters`, ...): the check would then judge a job that is not
// the one submitted. The partition, node count, tasks and CPUs a task cannot be set there (the
// job loader refuses them: configs/cluster_checks.cc).
bool sbatch_extra_reshapes(const std::vector<std::string>& sbatch_extra);

// The first SBATCH_*/SLURM_* variable set here that sbatch would let change the partition, the
// cluster or a node's share (SBATCH_PARTITION, SLURM_CLUSTERS, ...), or "".
std::string sbatch_environment_override();

// The refusal for `cluster` (without the file's name), naming the key (cluster.nodes,
// cluster.cpus_per_task, cluster.tasks_per_node, cluster.gpus_per_node); empty when some
// partition the job may go to holds it, or when that cannot be told (above).
std::string slurm_shape_refusal(const ClusterConfig& cluster, const SlurmPartitions& partitions);

// Asks sinfo and scontrol (10 s each at most); empty when either cannot tell.
SlurmPartitions query_slurm_partitions();

}  // namespace rm

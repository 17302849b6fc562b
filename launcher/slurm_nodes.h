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
//  - the partitions: submitted_partition()'s (sbatch takes a comma list: each is tried), or,
//    when it is empty, every partition sinfo lists (a site's job_submit plugin may route the job
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
  int cpus = 0;       // sinfo's %c: CPUs Slurm schedules on the node
  int gpus = 0;       // GPUs in its generic resources (%G)
  double memory = 0;  // bytes of its RealMemory (%m, megabytes); 0 when not configured (1 MB)
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

// Parses `sinfo --Node --noheader --format=%N|%P|%c|%G|%m` (sinfo marks the default partition
// with '*'; with --Node each line is one node of one partition). Empty when any line is not of
// that form (a memory that is not a whole number counts as not configured): a partial picture
// could refuse a job Slurm would run.
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

// Whether sbatch_extra (or SBATCH_CONSTRAINT here) keeps the job to some of the partition's nodes
// (`--constraint`, `--nodelist`, `--exclude`, `--nodefile`). A shape refusal stays right with
// them; the smallest node's memory does not (node_memory.h).
bool sbatch_extra_narrows_nodes(const std::vector<std::string>& sbatch_extra);

// Whether sbatch_extra asks for memory a CPU or a GPU (`--mem-per-cpu`, `--mem-per-gpu`): sbatch
// then drops an SBATCH_MEM_PER_NODE of the environment.
bool sbatch_extra_sets_memory(const std::vector<std::string>& sbatch_extra);

// The partition sbatch will put the job in: SBATCH_PARTITION's when it is set here (sbatch reads
// its environment after the script and lets it win over the script's lines; set but empty, the
// job goes to the default partition), else cluster.partition; "" for the default. *from (if
// given): "SBATCH_PARTITION=VALUE" when it came from the environment, else "".
std::string submitted_partition(const ClusterConfig& cluster, std::string* from = nullptr);

// The first SBATCH_*/SLURM_* variable set here (empty counts: sbatch reads it, and an empty one
// turns a flag on) that sbatch would let change the cluster or a node's share (SLURM_CLUSTERS,
// SBATCH_GRES, ...), or "". (Not SBATCH_PARTITION: the checks take submitted_partition().)
std::string sbatch_environment_override();

// The refusal for `cluster` (without the file's name), naming the key (cluster.nodes,
// cluster.cpus_per_task, cluster.tasks_per_node, cluster.gpus_per_node) and SBATCH_PARTITION
// when the partition is its; empty when some partition the job may go to holds it, or when
// that cannot be told (above).
std::string slurm_shape_refusal(const ClusterConfig& cluster, const SlurmPartitions& partitions);

// The smallest RealMemory, in bytes, of the nodes of `partition` (a comma list: of all of
// them), or of the default partition when it is empty; 0 when none of them declares its memory,
// a partition named is not listed, or none is named and none is marked default (a job_submit
// plugin chooses). *described: what the figure is of, for messages ("partition gpu", "partitions
// a,b", "the default partition batch").
double smallest_node_memory(const SlurmPartitions& partitions, const std::string& partition,
                            std::string* described);

// Asks sinfo and scontrol (10 s each at most), once for both submit checks: the nodes are empty
// when sinfo cannot tell, the partitions' limits unknown (-1) when scontrol cannot.
SlurmPartitions query_slurm_partitions();

}  // namespace rm

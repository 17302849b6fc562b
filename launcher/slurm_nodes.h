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
// The check refuses only what cannot run on any of the partition's nodes, whatever their state:
// a down or busy node can come back. Constraints in cluster.sbatch_extra (`--constraint=a100`)
// only narrow the nodes further, so a refusal stays right. An sbatch_extra option that changes
// a node's share (`--gres`, `--gpus`, ...) skips the check. So does
// sinfo being absent, failing, or not answering in 10 s.
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

// The partition's nodes and its name as sinfo gives it; `nodes` empty when unknown.
struct SlurmPartition {
  std::string name;
  std::vector<SlurmNode> nodes;
};

// Parses `sinfo --Node --noheader --format=%N|%P|%c|%G` output. It keeps the nodes of
// `partition`, or of the default partition (sinfo marks it with '*') when that is empty. Lines
// it cannot read are skipped.
SlurmPartition parse_sinfo_nodes(const std::string& sinfo_output, const std::string& partition);

// The GPUs in a %G field: the sum of the counts of its `gpu[:TYPE]:COUNT[(...)]` entries,
// e.g. "gpu:h100:8(S:0-1),shard:4" -> 8; "(null)" -> 0.
int gres_gpu_count(const std::string& gres);

// Whether cluster.sbatch_extra changes a node's share of CPUs or GPUs (`--gres`, `--gpus`,
// `--mincpus`, ...): the check would then judge a shape that is not the one submitted. The
// partition, node count, tasks and CPUs a task cannot be set there (the job loader refuses them:
// configs/cluster_checks.cc).
bool sbatch_extra_reshapes(const std::vector<std::string>& sbatch_extra);

// The refusal for `cluster` on `partition`, naming the key (cluster.nodes, cluster.cpus_per_task,
// cluster.tasks_per_node, cluster.gpus_per_node); empty when enough nodes hold the job's share,
// or when `partition` lists no node (unknown: not checked).
std::string slurm_shape_refusal(const ClusterConfig& cluster, const SlurmPartition& partition);

// Asks sinfo for the partition's nodes (10 s at most); `nodes` empty when it cannot tell.
SlurmPartition query_slurm_partition(const std::string& partition);

}  // namespace rm

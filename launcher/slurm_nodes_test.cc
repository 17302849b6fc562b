// The partition's nodes as submit's shape check takes them (launcher/slurm_nodes.h): sinfo's
// per-node lines, GPUs in generic resources, the sbatch_extra options that skip the check, and
// the refusal for each key. The whole path, sinfo and sbatch included, runs against the real
// local cluster in tests/slurm_submit_test.sh (case shape).
#include "launcher/slurm_nodes.h"

#include <gtest/gtest.h>

namespace rm {
namespace {

// Two partitions sharing node1-2; gpu has a larger node3 with GPUs.
constexpr const char* kSinfo =
    "node1|debug*|4|(null)\n"
    "node1|gpu|4|(null)\n"
    "node2|debug*|4|(null)\n"
    "node2|gpu|4|(null)\n"
    "node3|gpu|64|gpu:h100:8(S:0-1),shard:16\n"
    "sinfo: error: something to skip\n";

ClusterConfig shape(int nodes, int tasks_per_node, int cpus_per_task = 0, int gpus = 0) {
  ClusterConfig c;
  c.nodes = nodes;
  c.tasks_per_node = tasks_per_node;
  c.cpus_per_task = cpus_per_task;
  c.gpus_per_node = gpus;
  return c;
}

TEST(SlurmNodes, GpusAreCountedFromGenericResources) {
  EXPECT_EQ(gres_gpu_count("(null)"), 0);
  EXPECT_EQ(gres_gpu_count("gpu:8"), 8);
  EXPECT_EQ(gres_gpu_count("gpu:h100:8(S:0-1)"), 8);
  EXPECT_EQ(gres_gpu_count("gpu:a100:2(IDX:0-1),gpu:v100:2,shard:8"), 4);
  EXPECT_EQ(gres_gpu_count("shard:8,mps:100"), 0);
  EXPECT_EQ(gres_gpu_count("gpu:h100:x"), 0);
}

TEST(SlurmNodes, TheDefaultPartitionIsTheOneMarkedWithAStar) {
  const SlurmPartition p = parse_sinfo_nodes(kSinfo, "");
  EXPECT_EQ(p.name, "debug");
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[0].name, "node1");
  EXPECT_EQ(p.nodes[0].cpus, 4);
  EXPECT_EQ(p.nodes[1].gpus, 0);
}

TEST(SlurmNodes, ANamedPartitionOrAListKeepsEachNodeOnce) {
  const SlurmPartition gpu = parse_sinfo_nodes(kSinfo, "gpu");
  ASSERT_EQ(gpu.nodes.size(), 3u);
  EXPECT_EQ(gpu.nodes[2].cpus, 64);
  EXPECT_EQ(gpu.nodes[2].gpus, 8);
  EXPECT_EQ(parse_sinfo_nodes(kSinfo, "debug,gpu").nodes.size(), 3u);
  EXPECT_TRUE(parse_sinfo_nodes(kSinfo, "nosuch").nodes.empty());
  EXPECT_TRUE(parse_sinfo_nodes("", "").nodes.empty());
}

TEST(SlurmNodes, AShapeThePartitionHoldsPasses) {
  const SlurmPartition debug = parse_sinfo_nodes(kSinfo, "");
  EXPECT_EQ(slurm_shape_refusal(shape(2, 4), debug), "");
  EXPECT_EQ(slurm_shape_refusal(shape(2, 2, 2), debug), "");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 8, 8, 8), parse_sinfo_nodes(kSinfo, "gpu")), "");
  EXPECT_EQ(slurm_shape_refusal(shape(9, 99, 99, 99), SlurmPartition{}), "") << "unknown";
}

TEST(SlurmNodes, EachImpossibleShapeNamesItsKeyAndWhatThePartitionHas) {
  const SlurmPartition debug = parse_sinfo_nodes(kSinfo, "");
  EXPECT_EQ(slurm_shape_refusal(shape(3, 1), debug),
            "cluster.nodes: 3, but partition debug (sinfo) has 2 nodes: Slurm would never start "
            "the job");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 16), debug),
            "cluster.tasks_per_node x cluster.cpus_per_task: 1 x 16 = 16 CPUs a node, but the "
            "largest node of partition debug (sinfo) has 4 CPUs: Slurm would never start the job");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 8), debug),
            "cluster.tasks_per_node: 8 ranks a node, a CPU each, but the largest node of "
            "partition debug (sinfo) has 4 CPUs: Slurm would never start the job");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 1), debug),
            "cluster.gpus_per_node: 1, but no node of partition debug (sinfo) has a GPU: Slurm "
            "would never start the job");
  const SlurmPartition gpu = parse_sinfo_nodes(kSinfo, "gpu");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 16), gpu),
            "cluster.gpus_per_node: 16, but the nodes of partition gpu (sinfo) have at most 8 "
            "GPUs: Slurm would never start the job");
  // Each share fits a node, but only one node has all of it.
  EXPECT_EQ(slurm_shape_refusal(shape(2, 8, 0, 8), gpu),
            "cluster.nodes: 2 nodes of 8 CPUs and 8 GPUs each, but partition gpu (sinfo) has 1 "
            "such of its 3 nodes: Slurm would never start the job");
}

TEST(SlurmNodes, SbatchExtraThatReshapesANodesShareSkipsTheCheck) {
  for (const char* reshaping :
       {"--gres=gpu:4", "--gre=gpu:4", "--gpus=8", "--gpus 8", "--mincpus=32", "--cpus-per-gpu=4",
        "--gpus-per-task=1", "--threads-per-core=1"}) {
    EXPECT_TRUE(sbatch_extra_reshapes({"--constraint=a100", reshaping})) << reshaping;
  }
  for (const char* narrowing :
       {"--constraint=a100", "--exclusive", "--mail-type=END", "--comment=x", "--"}) {
    EXPECT_FALSE(sbatch_extra_reshapes({narrowing})) << narrowing;
  }
}

}  // namespace
}  // namespace rm

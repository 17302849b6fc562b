// A Slurm node's memory as submit's check takes it (launcher/node_memory.h): sbatch's
// environment, cluster.memory_per_node's `--mem` sizes, then sinfo's RealMemory of the
// partition the job goes to. The whole path, sinfo included, runs against the real local
// cluster in tests/slurm_submit_test.sh (case memory).
#include "launcher/node_memory.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "configs/slurm_memory.h"

namespace rm {
namespace {

constexpr double kMiB = 1024.0 * 1024;
constexpr double kGiB = 1024.0 * kMiB;

SlurmPartitions two_partitions() {
  return parse_sinfo_nodes(
      "small1|debug|4|(null)|4000\nbig1|batch*|4|(null)|512000\nbig2|batch*|4|(null)|256000\n");
}

TEST(NodeMemory, WithoutAPartitionTheDefaultPartitionsNodesCount) {
  ASSERT_EQ(std::getenv("SBATCH_PARTITION"), nullptr);
  ASSERT_EQ(std::getenv("SBATCH_MEM_PER_NODE"), nullptr);
  ClusterConfig cluster;
  MemoryCapacity node = slurm_node_capacity(cluster, two_partitions());
  EXPECT_EQ(node.host, 256000 * kMiB);
  EXPECT_EQ(node.host_name, "the smallest node of the default partition batch (sinfo)");
  cluster.partition = "debug";
  node = slurm_node_capacity(cluster, two_partitions());
  EXPECT_EQ(node.host, 4000 * kMiB);
  EXPECT_EQ(node.host_name, "the smallest node of partition debug (sinfo)");
  EXPECT_EQ(slurm_node_capacity(cluster, SlurmPartitions{}).host, 0) << "sinfo could not tell";
}

TEST(NodeMemory, SbatchsEnvironmentWinsOverTheJobFile) {
  ClusterConfig cluster;
  cluster.partition = "batch";
  cluster.memory_per_node = "64G";
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 64 * kGiB) << "--mem first";
  ::setenv("SBATCH_MEM_PER_NODE", "8G", 1);
  MemoryCapacity node = slurm_node_capacity(cluster, two_partitions());
  EXPECT_EQ(node.host, 8 * kGiB);
  EXPECT_EQ(node.host_name, "a node (SBATCH_MEM_PER_NODE=8G in the environment)");
  ::setenv("SBATCH_MEM_PER_NODE", "lots", 1);
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 0) << "sbatch refuses it";
  ::unsetenv("SBATCH_MEM_PER_NODE");
  cluster.memory_per_node.clear();
  ::setenv("SBATCH_PARTITION", "debug", 1);
  node = slurm_node_capacity(cluster, two_partitions());
  EXPECT_EQ(node.host, 4000 * kMiB);
  EXPECT_EQ(node.host_name,
            "the smallest node of partition debug (sinfo; SBATCH_PARTITION=debug in the "
            "environment)");
  ::unsetenv("SBATCH_PARTITION");
}

TEST(NodeMemory, SbatchDropsSbatchMemPerNodeForMemoryACpu) {
  ClusterConfig cluster;
  ::setenv("SBATCH_MEM_PER_NODE", "8G", 1);
  cluster.sbatch_extra = {"--mem-per-cpu=4G"};
  MemoryCapacity node = slurm_node_capacity(cluster, two_partitions());
  EXPECT_EQ(node.host, 256000 * kMiB) << "the nodes' own memory, not 8G";
  cluster.sbatch_extra.clear();
  ::setenv("SBATCH_MEM_PER_NODE", "0", 1);
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 256000 * kMiB)
      << "--mem=0: the whole node";
  ::unsetenv("SBATCH_MEM_PER_NODE");
  // The job file's own memory_per_node: 0 likewise (before: refused by the schema, and
  // sbatch_extra's --mem=0 refused as memory_per_node's to set).
  cluster.memory_per_node = "0";
  MemoryCapacity whole = slurm_node_capacity(cluster, two_partitions());
  EXPECT_EQ(whole.host, 256000 * kMiB);
  EXPECT_EQ(whole.host_name, "the smallest node of the default partition batch (sinfo)");
}

TEST(NodeMemory, AJobNotBoundToAnyNodeOfThePartitionIsNotJudgedBySinfo) {
  ClusterConfig cluster;
  cluster.partition = "debug";
  ASSERT_GT(slurm_node_capacity(cluster, two_partitions()).host, 0);
  // Kept to some nodes: their smallest may be larger than the partition's.
  cluster.sbatch_extra = {"--constraint=bigmem"};
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 0);
  // Sent to another cluster, whose nodes sinfo here does not list.
  cluster.sbatch_extra = {"--clusters=other"};
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 0);
  cluster.sbatch_extra.clear();
  ::setenv("SLURM_CLUSTERS", "other", 1);
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 0);
  ::unsetenv("SLURM_CLUSTERS");
  // --mem is asked of whichever nodes it lands on: still judged.
  cluster.sbatch_extra = {"--constraint=bigmem"};
  cluster.memory_per_node = "64G";
  EXPECT_EQ(slurm_node_capacity(cluster, two_partitions()).host, 64 * kGiB);
}

TEST(NodeMemory, SlurmSizesAreMegabytesUnlessSuffixed) {
  EXPECT_EQ(parse_slurm_memory("512"), 512.0 * 1024 * 1024);
  EXPECT_EQ(parse_slurm_memory("64G"), 64 * kGiB);
  EXPECT_EQ(parse_slurm_memory("2t"), 2048 * kGiB);
  EXPECT_EQ(parse_slurm_memory("100K"), 100.0 * 1024);
  for (const char* bad : {"", "1.5G", "64GB", "-1", "G", " 8G", "8 G"}) {
    EXPECT_LT(parse_slurm_memory(bad), 0) << bad;
  }
}

}  // namespace
}  // namespace rm

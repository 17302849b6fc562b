// A Slurm node's memory as submit's check takes it (launcher/node_memory.h): sinfo's RealMemory
// column and cluster.memory_per_node's `--mem` sizes. The whole path, sinfo included, runs
// against the real local cluster in tests/slurm_submit_test.sh (case memory).
#include "launcher/node_memory.h"

#include <gtest/gtest.h>

#include "configs/slurm_memory.h"

namespace rm {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(NodeMemory, SinfoGivesTheSmallestConfiguredNode) {
  constexpr double kMiB = 1024.0 * 1024;
  EXPECT_EQ(smallest_node_memory("64000\n8800+\n"), 8800 * kMiB);
  EXPECT_EQ(smallest_node_memory("1\n"), 0) << "RealMemory not configured";
  EXPECT_EQ(smallest_node_memory("1\n4096\n"), 4096 * kMiB);
  EXPECT_EQ(smallest_node_memory(""), 0);
  EXPECT_EQ(smallest_node_memory("sinfo: error: ...\n"), 0);
}

TEST(NodeMemory, WithoutAPartitionTheDefaultPartitionsNodesCount) {
  constexpr double kMiB = 1024.0 * 1024;
  // A small debug partition beside the default one: its nodes do not bound the default's jobs.
  const std::string sinfo = "debug|16000\nbatch*|512000\nbatch*|256000+\n";
  std::string name;
  EXPECT_EQ(smallest_node_memory(memory_of_partition(sinfo, "", &name)), 256000 * kMiB);
  EXPECT_EQ(name, "batch");
  name.clear();
  EXPECT_EQ(smallest_node_memory(memory_of_partition("a|100\nb|200\n", "", &name)), 100 * kMiB)
      << "no default marked: every node";
  EXPECT_EQ(name, "");
  EXPECT_EQ(smallest_node_memory(memory_of_partition("debug|16000\n", "debug", &name)),
            16000 * kMiB)
      << "sinfo was asked for the partition";
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

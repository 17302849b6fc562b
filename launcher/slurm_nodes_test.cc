// The partition's nodes as submit's shape check takes them (launcher/slurm_nodes.h): sinfo's
// per-node lines, GPUs in generic resources, the sbatch_extra options that skip the check, and
// the refusal for each key. The whole path, sinfo and sbatch included, runs against the real
// local cluster in tests/slurm_submit_test.sh (case memory).
#include "launcher/slurm_nodes.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace rm {
namespace {

// Two partitions sharing node1-2; gpu has a larger node3 with GPUs.
constexpr const char* kSinfo =
    "node1|debug*|4|(null)|16000\n"
    "node1|gpu|4|(null)|16000\n"
    "node2|debug*|4|(null)|8000\n"
    "node2|gpu|4|(null)|8000\n"
    "node3|gpu|64|gpu:h100:8(S:0-1),shard:16|512000\n";

std::string scontrol_line(const std::string& name, int total, const std::string& max_nodes,
                          const std::string& max_cpus) {
  return "PartitionName=" + name + " AllowGroups=ALL Default=NO MaxNodes=" + max_nodes +
         " MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=" + max_cpus +
         " Nodes=node[1-3] State=UP TotalCPUs=8 TotalNodes=" + std::to_string(total) +
         " SelectTypeParameters=NONE\n";
}

// kSinfo with every node listed, no limits.
SlurmPartitions cluster_of(const std::string& sinfo = kSinfo,
                           const std::string& limits = scontrol_line("debug", 2, "UNLIMITED",
                                                                     "UNLIMITED") +
                                                       scontrol_line("gpu", 3, "UNLIMITED",
                                                                     "UNLIMITED")) {
  SlurmPartitions p = parse_sinfo_nodes(sinfo);
  add_partition_limits(p, limits);
  return p;
}

ClusterConfig shape(int nodes, int tasks_per_node, int cpus_per_task = 0, int gpus = 0,
                    const std::string& partition = "") {
  ClusterConfig c;
  c.nodes = nodes;
  c.tasks_per_node = tasks_per_node;
  c.cpus_per_task = cpus_per_task;
  c.gpus_per_node = gpus;
  c.partition = partition;
  return c;
}

constexpr const char* kNever = ": Slurm would never start the job";

TEST(SlurmNodes, GpusAreCountedFromGenericResources) {
  EXPECT_EQ(gres_gpu_count("(null)"), 0);
  EXPECT_EQ(gres_gpu_count("gpu:8"), 8);
  EXPECT_EQ(gres_gpu_count("gpu:h100:8(S:0-1)"), 8);
  EXPECT_EQ(gres_gpu_count("gpu:a100:2(IDX:0-1),gpu:v100:2,shard:8"), 4);
  EXPECT_EQ(gres_gpu_count("shard:8,mps:100"), 0);
  EXPECT_EQ(gres_gpu_count("gpu:h100:x"), 0);
}

TEST(SlurmNodes, SinfoGivesEachPartitionsNodesOnceAndItsDefault) {
  const SlurmPartitions p = cluster_of(kSinfo + std::string("node3|gpu|64|gpu:8|512000\n"));
  ASSERT_EQ(p.all.size(), 2u);
  EXPECT_EQ(p.all[0].name, "debug");
  EXPECT_TRUE(p.all[0].is_default);
  EXPECT_FALSE(p.all[1].is_default);
  ASSERT_EQ(p.all[1].nodes.size(), 3u) << "node3 listed twice is one node";
  EXPECT_EQ(p.all[1].nodes[2].cpus, 64);
  EXPECT_EQ(p.all[1].nodes[2].gpus, 8);
  EXPECT_EQ(p.all[1].total_nodes, 3);
  EXPECT_EQ(p.all[1].max_nodes, -1) << "UNLIMITED";
}

TEST(SlurmNodes, AnythingUnreadableJudgesNothing) {
  for (const char* odd : {"sinfo: error: Unable to contact slurm controller\n",
                          "node4|gpu|4+|(null)|1\n", "node4|gpu|4|(null)\n", "|gpu|4|(null)|1\n"}) {
    EXPECT_TRUE(parse_sinfo_nodes(kSinfo + std::string(odd)).all.empty()) << odd;
  }
  EXPECT_EQ(slurm_shape_refusal(shape(9, 99, 99, 99), SlurmPartitions{}), "");
  // No scontrol figures: TotalNodes unknown.
  EXPECT_EQ(slurm_shape_refusal(shape(9, 1), cluster_of(kSinfo, "")), "");
}

TEST(SlurmNodes, ANodesMemoryIsItsRealMemory) {
  constexpr double kMiB = 1024.0 * 1024;
  const SlurmPartitions p =
      cluster_of(kSinfo + std::string("node4|debug*|4|(null)|1\nnode5|debug*|4|(null)|N/A\n"));
  ASSERT_EQ(p.all[0].nodes.size(), 4u);
  EXPECT_EQ(p.all[0].nodes[0].memory, 16000 * kMiB);
  EXPECT_EQ(p.all[0].nodes[2].memory, 0) << "RealMemory=1: Slurm's default, not configured";
  EXPECT_EQ(p.all[0].nodes[3].memory, 0) << "not a figure: not known, the line still read";
}

TEST(SlurmNodes, TheSmallestNodeIsOfThePartitionTheJobGoesTo) {
  constexpr double kMiB = 1024.0 * 1024;
  const SlurmPartitions p = cluster_of();
  std::string of;
  // A small debug partition beside the default one: its nodes do not bound the default's jobs.
  const SlurmPartitions batch = cluster_of(
      "small1|debug|4|(null)|4000\nbig1|batch*|4|(null)|512000\nbig2|batch*|4|(null)|256000\n");
  EXPECT_EQ(smallest_node_memory(batch, "", &of), 256000 * kMiB);
  EXPECT_EQ(of, "the default partition batch");
  EXPECT_EQ(smallest_node_memory(batch, "debug", &of), 4000 * kMiB);
  EXPECT_EQ(of, "partition debug");
  EXPECT_EQ(smallest_node_memory(batch, "batch,debug", &of), 4000 * kMiB) << "either may start it";
  EXPECT_EQ(smallest_node_memory(p, "nosuch", &of), 0) << "sbatch says so itself";
  EXPECT_EQ(smallest_node_memory(SlurmPartitions{}, "", &of), 0) << "sinfo could not tell";
  EXPECT_EQ(smallest_node_memory(batch, "debug,batch", &of), 4000 * kMiB);
  EXPECT_EQ(of, "partitions debug,batch");
  // None marked default: a job_submit plugin routes the job; the smallest of every partition's
  // nodes (hidden ones too) would be a guess.
  const SlurmPartitions none_default = cluster_of("a|p|4|(null)|300\nb|q|4|(null)|200\n");
  EXPECT_EQ(smallest_node_memory(none_default, "", &of), 0);
  EXPECT_EQ(smallest_node_memory(cluster_of("a|p*|4|(null)|1\n"), "", &of), 0)
      << "no node declares its memory";
}

TEST(SlurmNodes, APartitionWithNodesSinfoDoesNotListIsNotJudged) {
  // FUTURE nodes, and CLOUD nodes powered down: slurmctld leaves them out of sinfo.
  const SlurmPartitions p =
      cluster_of(kSinfo, scontrol_line("debug", 6, "UNLIMITED", "UNLIMITED") +
                             scontrol_line("gpu", 3, "UNLIMITED", "UNLIMITED"));
  EXPECT_EQ(slurm_shape_refusal(shape(3, 1, 0, 0, "debug"), p), "");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 16), p), "") << "gpu has node3; debug may hide more";
}

TEST(SlurmNodes, AShapeSomePartitionHoldsPasses) {
  const SlurmPartitions p = cluster_of();
  EXPECT_EQ(slurm_shape_refusal(shape(2, 4), p), "");
  EXPECT_EQ(slurm_shape_refusal(shape(2, 2, 2, 0, "debug"), p), "");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 8, 8, 8, "gpu"), p), "");
  // Without a partition, one the default cannot hold passes where another holds it: a site's
  // job_submit plugin may send GPU jobs there.
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 8), p), "");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 8, "debug,gpu"), p), "");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 0, "nosuch"), p), "") << "sbatch says so itself";
}

TEST(SlurmNodes, EachImpossibleShapeNamesItsKeyAndWhatThePartitionHas) {
  const SlurmPartitions p = cluster_of();
  EXPECT_EQ(slurm_shape_refusal(shape(3, 1, 0, 0, "debug"), p),
            "cluster.nodes: 3, but partition debug (sinfo) has 2 nodes" + std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 16, 0, "debug"), p),
            "cluster.tasks_per_node x cluster.cpus_per_task: 1 x 16 = 16 CPUs a node, but the "
            "largest node of partition debug (sinfo) has 4 CPUs" +
                std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(1, 8, 0, 0, "debug"), p),
            "cluster.tasks_per_node: 8 ranks a node, a CPU each, but the largest node of "
            "partition debug (sinfo) has 4 CPUs" +
                std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 1, "debug"), p),
            "cluster.gpus_per_node: 1, but no node of partition debug (sinfo) has a GPU" +
                std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 16, "gpu"), p),
            "cluster.gpus_per_node: 16, but the nodes of partition gpu (sinfo) have at most 8 "
            "GPUs" +
                std::string(kNever));
  // Each share fits a node, but only one node has all of it.
  EXPECT_EQ(slurm_shape_refusal(shape(2, 8, 0, 8, "gpu"), p),
            "cluster.nodes: 2 nodes of 8 CPUs and 8 GPUs each, but partition gpu (sinfo) has 1 "
            "such of its 3 nodes" +
                std::string(kNever));
  // No partition named: the default's limits, and no other holds it either.
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 16), p),
            "cluster.gpus_per_node: 16, but no node of partition debug (sinfo) has a GPU; no other "
            "partition of the cluster holds it either" +
                std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(4, 1, 0, 0, "debug,gpu"), p),
            "cluster.nodes: 4, but partition debug (sinfo) has 2 nodes; nor does the other "
            "partition of cluster.partition" +
                std::string(kNever));
  // 64-bit: 2^31 CPUs a node is refused, not wrapped into a pass.
  EXPECT_NE(slurm_shape_refusal(shape(1, 1 << 16, 1 << 16, 0, "debug"), p), "");
}

TEST(SlurmNodes, ThePartitionsLimitsAreJudgedToo) {
  const SlurmPartitions p = cluster_of(
      kSinfo, scontrol_line("debug", 2, "1", "2") + scontrol_line("gpu", 3, "UNLIMITED", "16"));
  EXPECT_EQ(slurm_shape_refusal(shape(2, 1, 0, 0, "debug"), p),
            "cluster.nodes: 2, but partition debug allows a job 1 node at most (MaxNodes)" +
                std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(1, 4, 0, 0, "debug"), p),
            "cluster.tasks_per_node: 4 ranks a node, a CPU each, but partition debug lets a job "
            "use 2 CPUs of a node at most (MaxCPUsPerNode)" +
                std::string(kNever));
  EXPECT_EQ(slurm_shape_refusal(shape(1, 16, 0, 0, "gpu"), p), "");
  EXPECT_NE(slurm_shape_refusal(shape(1, 17, 0, 0, "gpu"), p), "");
}

TEST(SlurmNodes, SbatchsEnvironmentThatOverridesTheScriptSkipsTheCheck) {
  ASSERT_EQ(sbatch_environment_override(), "") << "the test's own environment sets one";
  ::setenv("SBATCH_GRES", "gpu:8", 1);
  EXPECT_EQ(sbatch_environment_override(), "SBATCH_GRES");
  ::setenv("SBATCH_GRES", "", 1);
  EXPECT_EQ(sbatch_environment_override(), "SBATCH_GRES") << "set but empty: sbatch reads it too";
  ::unsetenv("SBATCH_GRES");
  ::setenv("SLURM_CLUSTERS", "other", 1);
  EXPECT_EQ(sbatch_environment_override(), "SLURM_CLUSTERS");
  ::unsetenv("SLURM_CLUSTERS");
}

TEST(SlurmNodes, SbatchPartitionInTheEnvironmentIsThePartitionJudged) {
  ASSERT_EQ(std::getenv("SBATCH_PARTITION"), nullptr) << "the test's own environment sets it";
  const SlurmPartitions p = cluster_of();
  std::string from;
  EXPECT_EQ(submitted_partition(shape(1, 1, 0, 0, "gpu"), &from), "gpu");
  EXPECT_EQ(from, "");
  ::setenv("SBATCH_PARTITION", "debug", 1);
  EXPECT_EQ(submitted_partition(shape(1, 1, 0, 0, "gpu"), &from), "debug") << "it wins";
  EXPECT_EQ(from, "SBATCH_PARTITION=debug");
  EXPECT_EQ(sbatch_environment_override(), "") << "judged, not skipped";
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 8, "gpu"), p),
            "cluster.gpus_per_node: 8, but no node of partition debug (sinfo) has a GPU "
            "(SBATCH_PARTITION=debug in the environment)" +
                std::string(kNever));
  ::setenv("SBATCH_PARTITION", "", 1);
  EXPECT_EQ(submitted_partition(shape(1, 1, 0, 0, "gpu"), &from), "")
      << "empty: the script's partition is replaced all the same, by the default";
  EXPECT_EQ(from, "SBATCH_PARTITION=");
  EXPECT_EQ(slurm_shape_refusal(shape(1, 1, 0, 8, "gpu"), p), "") << "gpu may still be routed to";
  ::unsetenv("SBATCH_PARTITION");
}

TEST(SlurmNodes, SbatchExtraThatNarrowsTheNodesOrSetsMemoryIsSeen) {
  for (const char* narrowing : {"--constraint=bigmem", "--const=bigmem", "--nodelist=node[1-2]",
                                "--exclude=node3", "--nodefile=nodes.txt"}) {
    EXPECT_TRUE(sbatch_extra_narrows_nodes({narrowing})) << narrowing;
  }
  EXPECT_FALSE(sbatch_extra_narrows_nodes({"--exclusive", "--comment=x"}));
  ::setenv("SBATCH_CONSTRAINT", "bigmem", 1);
  EXPECT_TRUE(sbatch_extra_narrows_nodes({})) << "SBATCH_CONSTRAINT in the environment";
  ::unsetenv("SBATCH_CONSTRAINT");
  EXPECT_TRUE(sbatch_extra_sets_memory({"--mem-per-cpu=4G"}));
  EXPECT_TRUE(sbatch_extra_sets_memory({"--mem-per-g=8G"}));
  EXPECT_FALSE(sbatch_extra_sets_memory({"--constraint=bigmem"}));
}

TEST(SlurmNodes, SbatchExtraThatReshapesANodesShareSkipsTheCheck) {
  for (const char* reshaping :
       {"--gres=gpu:4", "--gre=gpu:4", "--gpus=8", "--gpus 8", "--mincpus=32", "--cpus-per-gpu=4",
        "--gpus-per-task=1", "--threads-per-core=1", "--overcommit", "--clusters=other",
        "--cluster-constraint=x", "--tres-per-task=cpu:4"}) {
    EXPECT_TRUE(sbatch_extra_reshapes({"--constraint=a100", reshaping})) << reshaping;
  }
  for (const char* narrowing :
       {"--constraint=a100", "--exclusive", "--mail-type=END", "--comment=x", "--"}) {
    EXPECT_FALSE(sbatch_extra_reshapes({narrowing})) << narrowing;
  }
}

}  // namespace
}  // namespace rm

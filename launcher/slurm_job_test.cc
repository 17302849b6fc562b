// What status makes of scontrol's answer (launcher/slurm_job.h): the fields of its one line, and
// which pending reasons mean that Slurm will not start the job as it asks.
#include "launcher/slurm_job.h"

#include <gtest/gtest.h>

namespace rm {
namespace {

TEST(SlurmJob, FieldsOfScontrolsOneLine) {
  const std::string line =
      "JobId=116 JobName=shakespeare UserId=root(0) JobState=PENDING Reason=PartitionNodeLimit "
      "Dependency=(null) NumNodes=3";
  EXPECT_EQ(scontrol_field(line, "JobId"), "116");
  EXPECT_EQ(scontrol_field(line, "JobState"), "PENDING");
  EXPECT_EQ(scontrol_field(line, "Reason"), "PartitionNodeLimit");
  EXPECT_EQ(scontrol_field(line, "Id"), "") << "a key is a whole word";
  EXPECT_EQ(scontrol_field(line, "NodeList"), "");
}

TEST(SlurmJob, OnlyReasonsThatNeedTheClusterChangedBlockForGood) {
  // Seen on the local cluster: cluster.nodes 3 on 2 nodes, cpus_per_task 16 on 4-CPU nodes.
  for (const char* never :
       {"PartitionNodeLimit", "PartitionConfig", "PartitionTimeLimit", "BadConstraints",
        "QOSMaxCpuPerJobLimit", "AssocMaxNodePerJobLimit", "QOSMaxWallDurationPerJobLimit",
        "QOSMaxGRESPerNode", "QOSMaxCpuPerNode", "QOSMinCpuNotSatisfied"}) {
    EXPECT_TRUE(slurm_reason_blocks_for_good(never)) << never;
  }
  for (const char* waits :
       {"None", "Resources", "Priority", "ReqNodeNotAvail,_UnavailableNodes:node1", "Dependency",
        "JobHeldUser", "BeginTime", "PartitionDown", "QOSMaxJobsPerUserLimit", "AssocGrpCpuLimit",
        "QOSGrpNodeLimit", ""}) {
    EXPECT_FALSE(slurm_reason_blocks_for_good(waits)) << waits;
  }
}

}  // namespace
}  // namespace rm

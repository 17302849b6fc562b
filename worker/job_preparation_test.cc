// check_job: the one preparation of a job that `run` and every rank go through.
#include "worker/job_preparation.h"

#include <gtest/gtest.h>

#include "configs/config_error.h"
#include "worker/data/data_error.h"

namespace rm {
namespace {

const char* const kJob = "configs/shakespeare.yaml";

TEST(JobPreparation, ChecksTheJobItsDataTheDeviceAndTheMemory) {
  JobPlacement where;
  where.ranks = 2;
  where.ranks_here = 2;
  const CheckedJob c = check_job(kJob, {"parallel.backend=cpu"}, where);
  EXPECT_EQ(c.job.name, "shakespeare");
  ASSERT_NE(c.data.train, nullptr);
  EXPECT_GT(c.data.train->num_windows(), 0u);
  EXPECT_EQ(c.device.kind, ComputeKind::kCpu);
  EXPECT_GT(c.capacity.host, 0);  // the memory check ran, against this host's RAM
  EXPECT_EQ(c.fit.ranks, 2);
  EXPECT_EQ(c.fit.ranks_on_host, 2);
  EXPECT_EQ(c.capacity.host_name, "this host");  // the launcher's wording
}

TEST(JobPreparation, OnlyOneRankOfAHostChecksItsMemoryAndRanksNameTheirHost) {
  JobPlacement other;
  other.checks_memory = false;
  EXPECT_EQ(check_job(kJob, {"parallel.backend=cpu"}, other).capacity.host, 0);
  JobPlacement rank;
  rank.names_host = true;
  const std::string name = check_job(kJob, {"parallel.backend=cpu"}, rank).capacity.host_name;
  EXPECT_TRUE(name.rfind("host ", 0) == 0 || name.rfind("node ", 0) == 0) << name;
}

TEST(JobPreparation, BadDataIsRefusedBeforeTheDeviceOrMemory) {
  JobPlacement where;
  EXPECT_THROW(check_job(kJob, {"data.train=no/such/file.txt"}, where), DataError);
}

TEST(JobPreparation, AJobTooLargeForTheHostIsRefused) {
  JobPlacement where;
  where.ranks = 1;
  EXPECT_THROW(check_job(kJob,
                         {"parallel.backend=cpu", "model.width=16384", "model.layers=64",
                          "model.heads=16"},
                         where),
               JobConfigError);
}

}  // namespace
}  // namespace rm

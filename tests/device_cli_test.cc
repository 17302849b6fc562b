// parallel.backend through the real binary: a cuda job on a machine without a usable GPU fails
// at start-up with one message and exit 2, on one rank and on two, writing nothing; auto says
// which backend it chose and why.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kernels/compute_factory.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

std::string tiny_job(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: tiny
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 16, layers: 1, heads: 2, width: 16}
data: {train: data/tinyshakespeare.txt, val_fraction: 0.1}
train: {steps: 2, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1}
)");
}

class DeviceCli : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_count(&why) > 0) GTEST_SKIP() << "a GPU is visible: this checks its absence";
  }
};

TEST_P(DeviceCli, CudaWithoutAGpuFailsAtStartUpAndWritesNothing) {
  TempDir dir;
  const int nproc = GetParam();
  const auto r = run_cli("run " + tiny_job(dir) + " --set parallel.backend=cuda --nproc " +
                             std::to_string(nproc),
                         dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("parallel.backend is cuda, but no GPU is usable here"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("use parallel.backend: cpu"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run"))) << "nothing may be written for a job that fails";
}

TEST_P(DeviceCli, AutoSaysItChoseTheCpuAndWhy) {
  TempDir dir;
  const int nproc = GetParam();
  const auto r = run_cli("run " + tiny_job(dir) + " --nproc " + std::to_string(nproc), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("compute cpu, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(auto: no GPU visible ("), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCli, ::testing::Values(1, 2));

}  // namespace
}  // namespace rm

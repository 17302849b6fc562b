// choose_device: every combination of parallel.backend, visible GPUs and ranks per node.
#include "worker/device_select.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace rm {
namespace {

std::string error_of(Backend backend, int local_ranks, int gpus) {
  unsetenv("CUDA_VISIBLE_DEVICES");  // the messages quote it when set
  try {
    choose_device(backend, 0, local_ranks, gpus, "no CUDA-capable device is detected");
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceSelect, CpuIsTheCpuWhateverIsVisible) {
  EXPECT_EQ(choose_device(Backend::kCpu, 1, 2, 8, "").kind, ComputeKind::kCpu);
  EXPECT_EQ(choose_device(Backend::kCpu, 0, 1, 0, "x").kind, ComputeKind::kCpu);
}

TEST(DeviceSelect, AutoTakesTheLocalRanksGpuWhenEveryRankHasOne) {
  const DeviceChoice c = choose_device(Backend::kAuto, 3, 4, 8, "");
  EXPECT_EQ(c.kind, ComputeKind::kCuda);
  EXPECT_EQ(c.device, 3);
  EXPECT_EQ(c.reason, "auto: 8 GPUs visible");
  const DeviceChoice none = choose_device(Backend::kAuto, 0, 2, 0, "no CUDA-capable device is detected");
  EXPECT_EQ(none.kind, ComputeKind::kCpu);
  EXPECT_EQ(none.reason, "auto: no GPU visible (no CUDA-capable device is detected)");
}

TEST(DeviceSelect, CudaWithoutAGpuIsAClearError) {
  EXPECT_EQ(error_of(Backend::kCuda, 1, 0),
            "parallel.backend is cuda, but no GPU is usable here: no CUDA-capable device is "
            "detected; use parallel.backend: cpu (or auto)");
  const DeviceChoice c = choose_device(Backend::kCuda, 1, 2, 2, "");
  EXPECT_EQ(c.kind, ComputeKind::kCuda);
  EXPECT_EQ(c.device, 1);
}

TEST(DeviceSelect, MoreRanksThanGpusIsAClearError) {
  EXPECT_EQ(error_of(Backend::kCuda, 4, 2),
            "parallel.backend is cuda: 4 ranks on this node but only 2 GPUs visible; each rank "
            "needs its own GPU: start at most 2 ranks per node");
  EXPECT_EQ(error_of(Backend::kAuto, 2, 1),
            "parallel.backend is auto: 2 ranks on this node but only 1 GPU visible; each rank "
            "needs its own GPU: start at most 1 rank per node, or set parallel.backend: cpu");
}

// Under MPI or srun a node's ranks may each see a GPU of their own (Slurm's --gpus-per-task sets
// CUDA_VISIBLE_DEVICES per task): fewer visible GPUs than ranks is then no error by itself; the
// rank takes its visible GPU local rank mod their number, and the ranks compare UUIDs.
TEST(DeviceSelect, RanksThatMayEachSeeTheirOwnGpuTakeTheirVisibleOne) {
  for (const Backend backend : {Backend::kCuda, Backend::kAuto}) {
    const DeviceChoice one = choose_device(backend, 3, 4, 1, "", /*own_gpus_possible=*/true);
    EXPECT_EQ(one.kind, ComputeKind::kCuda);
    EXPECT_EQ(one.device, 0);
    EXPECT_NE(one.reason.find("1 GPU visible to this rank of 4 on the node"), std::string::npos)
        << one.reason;
    const DeviceChoice two = choose_device(backend, 3, 4, 2, "", true);
    EXPECT_EQ(two.device, 1);
  }
  // As many GPUs as ranks: GPU local rank, as without the binding.
  EXPECT_EQ(choose_device(Backend::kCuda, 3, 4, 4, "", true).device, 3);
  // No GPU at all stays an error (cuda) or the CPU (auto).
  EXPECT_THROW(choose_device(Backend::kCuda, 0, 2, 0, "none", true), DeviceError);
  EXPECT_EQ(choose_device(Backend::kAuto, 0, 2, 0, "none", true).kind, ComputeKind::kCpu);
}

TEST(DeviceSelect, TwoRanksOfANodeOnOneGpuAreNamed) {
  // Bound per task: four GPUs, one a rank, two hosts.
  EXPECT_EQ(gpus_shared({"aa", "bb", "cc", "dd"}, {0, 0, 1, 1}), "");
  // The same GPU seen by ranks of different hosts cannot be one GPU (UUIDs are unique): only
  // a node's ranks are compared.
  EXPECT_EQ(gpus_shared({"aa", "bb", "aa", "bb"}, {0, 0, 1, 1}), "");
  // Four ranks on a node that sees one GPU: ranks 0 and 1 are the first pair on it.
  EXPECT_EQ(gpus_shared({"aa", "aa", "aa", "aa"}, {0, 0, 0, 0}),
            "ranks 0 and 1 are on the same node and would use the same GPU (UUID aa); each rank "
            "needs its own GPU: start fewer ranks per node, or give each task its own GPU "
            "(Slurm: --gpus-per-task=1)");
  EXPECT_NE(gpus_shared({"aa", "bb", "cc", "bb"}, {0, 0, 0, 0}).find("ranks 1 and 3"),
            std::string::npos);
  // A rank without a GPU (no UUID) shares nothing.
  EXPECT_EQ(gpus_shared({"", ""}, {0, 0}), "");
}

}  // namespace
}  // namespace rm

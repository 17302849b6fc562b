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

}  // namespace
}  // namespace rm

// The GPU peak table: the names CUDA reports for the parts we plan for, the more specific name
// first, unknown parts left unknown, and the override.
#include "launcher/gpu_peak.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace rm {
namespace {

TEST(GpuPeak, NamesAsCudaReportsThem) {
  unsetenv("RM_GPU_PEAK_TFLOPS");
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H100 80GB HBM3").bf16_flops, 989e12);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H100 80GB HBM3").tf32_flops, 495e12);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H100 PCIe").bf16_flops, 756e12);  // not the SXM figure
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA A100-SXM4-80GB").bf16_flops, 312e12);
  EXPECT_NE(gpu_peak("cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)").source.find("H100 SXM"),
            std::string::npos);
  // Whole words only: a name that holds another as a part is not that part.
  EXPECT_NE(gpu_peak("NVIDIA GH200 480GB").source.find("GH200"), std::string::npos);
  EXPECT_NE(gpu_peak("NVIDIA H200").source.find("H200 SXM"), std::string::npos);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H200 NVL").bf16_flops, 835e12);
  EXPECT_EQ(gpu_peak("NVIDIA RTX A1000").bf16_flops, 0);  // not an A100
  EXPECT_EQ(gpu_peak("NVIDIA A10G").bf16_flops, 0);       // not an A10
  EXPECT_EQ(gpu_peak("NVIDIA GeForce GTX 1080").bf16_flops, 0);
  EXPECT_TRUE(gpu_peak("NVIDIA GeForce GTX 1080").source.empty());
}

TEST(GpuPeak, TheEnvironmentOverridesTheTable) {
  setenv("RM_GPU_PEAK_TFLOPS", "100", 1);
  const GpuPeak p = gpu_peak("NVIDIA H100 80GB HBM3");
  unsetenv("RM_GPU_PEAK_TFLOPS");
  EXPECT_DOUBLE_EQ(p.bf16_flops, 100e12);
  EXPECT_DOUBLE_EQ(p.tf32_flops, 50e12);
  EXPECT_EQ(p.source, "RM_GPU_PEAK_TFLOPS=100");
}

}  // namespace
}  // namespace rm

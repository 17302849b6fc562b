// The dense tensor-core peak of a GPU, by the name CUDA reports: the denominator of `bench
// train`'s MFU on the cuda backend. Vendors' published dense (not 2:4-sparse) figures; the clock
// a GPU holds under load can be lower, which only makes the MFU look worse, never better.
#pragma once

#include <string>

namespace rm {

struct GpuPeak {
  double bf16_flops = 0;  // dense bf16 with fp32 accumulation
  double tf32_flops = 0;  // dense TF32 (what fp32 jobs' GEMMs use with allow_tf32)
  std::string source;     // "H100 SXM (NVIDIA datasheet)"
};

// From cudaDeviceProp::name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", ...); zeros and an
// empty source for a GPU not in the table. RM_GPU_PEAK_TFLOPS=<bf16 TFLOP/s> overrides (TF32 is
// then taken as half of it).
GpuPeak gpu_peak(const std::string& device_name);

}  // namespace rm

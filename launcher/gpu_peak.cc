#include "launcher/gpu_peak.h"

#include <cstdlib>

namespace rm {
namespace {

struct GpuPeakEntry {
  const char* needle;  // matched against the device name; the first match wins
  double bf16_tflops, tf32_tflops;
  const char* source;
};

// Order matters: the more specific names first (PCIe before the H100 SXM default).
constexpr GpuPeakEntry kTable[] = {
    {"H100 PCIe", 756, 378, "H100 PCIe (NVIDIA datasheet)"},
    {"H100 NVL", 835, 418, "H100 NVL (NVIDIA datasheet)"},
    {"H200", 989, 495, "H200 SXM (NVIDIA datasheet)"},
    {"H100", 989, 495, "H100 SXM (NVIDIA datasheet)"},
    {"GH200", 989, 495, "GH200 (NVIDIA datasheet)"},
    {"A100", 312, 156, "A100 (NVIDIA datasheet)"},
    {"L40S", 362, 183, "L40S (NVIDIA datasheet)"},
    {"A10", 125, 62.5, "A10 (NVIDIA datasheet)"},
};

}  // namespace

GpuPeak gpu_peak(const std::string& device_name) {
  GpuPeak p;
  if (const char* v = std::getenv("RM_GPU_PEAK_TFLOPS")) {
    const double t = std::atof(v);
    if (t > 0) {
      p.bf16_flops = t * 1e12;
      p.tf32_flops = t * 1e12 / 2;
      p.source = std::string("RM_GPU_PEAK_TFLOPS=") + v;
      return p;
    }
  }
  for (const GpuPeakEntry& e : kTable) {
    if (device_name.find(e.needle) != std::string::npos) {
      p.bf16_flops = e.bf16_tflops * 1e12;
      p.tf32_flops = e.tf32_tflops * 1e12;
      p.source = e.source;
      return p;
    }
  }
  return p;
}

}  // namespace rm

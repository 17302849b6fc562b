#include "launcher/gpu_peak.h"

#include <cctype>
#include <cstdlib>

namespace rm {
namespace {

struct GpuPeakEntry {
  const char* needle;  // a whole word (or words) of the device name; the first match wins
  double bf16_tflops, tf32_tflops;
  const char* source;
};

// Order matters: the more specific names first (PCIe before the H100 SXM default).
constexpr GpuPeakEntry kTable[] = {
    {"H100 PCIe", 756, 378, "H100 PCIe (NVIDIA datasheet)"},
    {"H100 NVL", 835, 418, "H100 NVL (NVIDIA datasheet)"},
    {"H200 NVL", 835, 418, "H200 NVL (NVIDIA datasheet)"},
    {"H200", 989, 495, "H200 SXM (NVIDIA datasheet)"},
    {"H100", 989, 495, "H100 SXM (NVIDIA datasheet)"},
    {"GH200", 989, 495, "GH200 (NVIDIA datasheet)"},
    {"A100", 312, 156, "A100 (NVIDIA datasheet)"},
    {"L40S", 362, 183, "L40S (NVIDIA datasheet)"},
    {"A10", 125, 62.5, "A10 (NVIDIA datasheet)"},
};

// Whether `needle` occurs in `name` as whole words: "A100" in "NVIDIA A100-SXM4-80GB", not in
// "NVIDIA RTX A1000"; "H200" not in "NVIDIA GH200 480GB".
bool has_words(const std::string& name, const std::string& needle) {
  const auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (size_t at = name.find(needle); at != std::string::npos; at = name.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if ((at == 0 || !word_char(name[at - 1])) && (end == name.size() || !word_char(name[end]))) {
      return true;
    }
  }
  return false;
}

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
    if (has_words(device_name, e.needle)) {
      p.bf16_flops = e.bf16_tflops * 1e12;
      p.tf32_flops = e.tf32_tflops * 1e12;
      p.source = e.source;
      return p;
    }
  }
  return p;
}

}  // namespace rm

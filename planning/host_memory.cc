#include "planning/host_memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/compute_factory.h"

namespace rm {
namespace {

// The pinned figures (pin_memory_for_tests), or -1.
double g_host_pin = -1;
double g_gpu_pin = -1;

// The bytes `text` says, or -1 when it is null or malformed (named `name` in the warning).
double pinned_bytes(const char* name, const char* text) {
  if (text == nullptr) return -1;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  const std::string unit = end;
  const char* const units = "KMGT";
  if (unit.size() == 1 && std::strchr(units, unit[0]) != nullptr) {
    for (const char* u = units; *u != unit[0]; ++u) v *= 1024;
    v *= 1024;
  } else if (!unit.empty() || end == text) {
    std::fprintf(stderr, "ringmaster: %s=%s ignored: not a number of bytes (e.g. 16G)\n", name,
                 text);
    return -1;
  }
  return v >= 0 ? v : -1;
}

}  // namespace

void pin_memory_for_tests(const char* host, const char* gpu) {
  g_host_pin = pinned_bytes("RM_TEST_HOST_MEMORY", host);
  g_gpu_pin = pinned_bytes("RM_TEST_GPU_MEMORY", gpu);
}

double host_memory() {
  if (g_host_pin >= 0) return g_host_pin;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    double kib = 0;
    if (fields >> key >> kib >> unit && key == "MemTotal:") return kib * 1024;
  }
  return 0;  // no /proc/meminfo: unknown, nothing is refused
}

double gpu_memory() {
  if (g_gpu_pin >= 0) return g_gpu_pin;
  return static_cast<double>(cuda_device_memory(0));
}

}  // namespace rm

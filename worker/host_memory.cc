#include "worker/host_memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/compute_factory.h"

namespace rm {
namespace {

// The value of a test override, or -1 when it is unset or malformed.
double test_override(const char* name) {
  const char* text = std::getenv(name);
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

double host_memory() {
  const double pinned = test_override("RM_TEST_HOST_MEMORY");
  if (pinned >= 0) return pinned;
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
  const double pinned = test_override("RM_TEST_GPU_MEMORY");
  if (pinned >= 0) return pinned;
  return static_cast<double>(cuda_device_memory(0));
}

}  // namespace rm

#include "worker/test_hooks.h"

#include <cstdio>
#include <cstdlib>

#include "checkpoint/checkpoint_pin.h"
#include "io/fault_file_system.h"
#include "planning/host_memory.h"
#include "worker/fault_injection.h"

namespace rm {

void install_test_hooks_from_env() {
  io::install_fault_file_system(std::getenv("RM_TEST_IO_FAULT"));
  install_fault_injection(std::getenv("RM_TEST_FAULT"));
  pin_memory_for_tests(std::getenv("RM_TEST_HOST_MEMORY"), std::getenv("RM_TEST_GPU_MEMORY"));
  if (const char* pause = std::getenv("RM_TEST_READ_PAUSE_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(pause, &end, 10);
    if (end == pause || *end != '\0' || ms < 0 || ms > 600000) {
      std::fprintf(stderr, "ringmaster: RM_TEST_READ_PAUSE_MS=%s: not milliseconds; ignored\n",
                   pause);
    } else {
      set_read_pause_ms_for_tests(static_cast<int>(ms));
    }
  }
}

}  // namespace rm

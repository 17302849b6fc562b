#include "worker/test_hooks.h"

#include <cstdlib>

#include "io/fault_file_system.h"
#include "planning/host_memory.h"
#include "worker/fault_injection.h"

namespace rm {

void install_test_hooks_from_env() {
  io::install_fault_file_system(std::getenv("RM_TEST_IO_FAULT"));
  install_fault_injection(std::getenv("RM_TEST_FAULT"));
  pin_memory_for_tests(std::getenv("RM_TEST_HOST_MEMORY"), std::getenv("RM_TEST_GPU_MEMORY"));
}

}  // namespace rm

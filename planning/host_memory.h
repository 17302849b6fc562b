// What memory a job's ranks can have on this machine: the host's RAM, and each GPU's.
//
//   host_memory()   MemTotal of /proc/meminfo: the ceiling, not what happens to be free -- the
//                   check built on it (memory_fit.h) refuses only what can never fit.
//   gpu_memory()    the memory of the first visible GPU (ranks each take one; GPUs of a node are
//                   assumed alike), or 0 when no GPU is visible or the build has no CUDA.
//
// Tests pin either figure with RM_TEST_HOST_MEMORY / RM_TEST_GPU_MEMORY (bytes, or a number
// with K, M, G or T for KiB..TiB; worker/test_hooks.h passes them to pin_memory_for_tests): the
// checks then give the same answer on any machine, and the GPU path runs where there is no
// GPU. A malformed value is ignored with a warning.
#pragma once

namespace rm {

double host_memory();
double gpu_memory();

// Pins the figures above to `host` and `gpu` bytes (text as above; null: not pinned).
void pin_memory_for_tests(const char* host, const char* gpu);

}  // namespace rm

#include "kernels/compute_factory.h"

#include <stdexcept>

#include "kernels/cpu/cpu_compute.h"
#include "kernels/cpu/threads.h"
#ifdef RM_HAVE_CUDA
#include "kernels/cuda/cuda_compute.h"
#endif

namespace rm {

const char* compute_kind_name(ComputeKind kind) {
  return kind == ComputeKind::kCuda ? "cuda" : "cpu";
}

int set_host_threads(int n) {
  return cpu::set_num_threads(n);
}

bool cuda_compiled() {
#ifdef RM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count(std::string* why) {
#ifdef RM_HAVE_CUDA
  return cuda::visible_device_count(why);
#else
  if (why) *why = "this build of ringmaster has no CUDA support (CMake did not find CUDA)";
  return 0;
#endif
}

size_t cuda_device_memory(int device) {
#ifdef RM_HAVE_CUDA
  return cuda::device_memory(device);
#else
  (void)device;
  return 0;
#endif
}

std::string cuda_device_uuid(int device) {
#ifdef RM_HAVE_CUDA
  return cuda::device_uuid(device);
#else
  (void)device;
  return "";
#endif
}

std::unique_ptr<Compute> make_compute(ComputeKind kind, const ComputeOptions& options) {
  if (kind == ComputeKind::kCpu) return cpu::make_cpu_compute(options.threads);
#ifdef RM_HAVE_CUDA
  return cuda::make_cuda_compute(options.device, options.allow_tf32, options.notes);
#else
  std::string why;
  cuda_device_count(&why);
  throw std::runtime_error("cannot use the cuda backend: " + why);
#endif
}

}  // namespace rm

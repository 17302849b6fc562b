#include "kernels/cuda/device_scratch.h"

#include <cstdio>

#include "kernels/cuda/cuda_check.h"

namespace rm::cuda {

DeviceScratch::~DeviceScratch() {
  // Destructors must not throw: a failure here is reported, not raised.
  if (ptr_ != nullptr) {
    const cudaError_t rc = cudaFree(ptr_);
    if (rc != cudaSuccess) std::fprintf(stderr, "rm::cuda: cudaFree: %s\n", cudaGetErrorString(rc));
  }
}

void* DeviceScratch::get(size_t bytes, cudaStream_t in_use_on) {
  if (bytes <= bytes_ && ptr_ != nullptr) return ptr_;
  if (ptr_ != nullptr) {
    RM_CUDA_CHECK(cudaStreamSynchronize(in_use_on), kThrow);
    RM_CUDA_CHECK(cudaFree(ptr_), kThrow);
    ptr_ = nullptr;
    bytes_ = 0;
    // Moved as soon as the old buffer is gone: a graph recorded on it is stale even if the
    // allocation below fails (out of memory) and throws.
    ++moves_;
  }
  RM_CUDA_CHECK(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), kThrow);
  bytes_ = bytes;
  ++moves_;
  return ptr_;
}

}  // namespace rm::cuda

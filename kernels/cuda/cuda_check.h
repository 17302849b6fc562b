// RM_CUDA_CHECK: the one check of a CUDA runtime status, for every CUDA call in the project
// (kernels/cuda/ and collectives/nccl/). Wrap each call where it is made, so its failure is
// reported with the call's own text and the runtime's message.
//
//   RM_CUDA_CHECK(cudaMalloc(&p, n), rm::cuda::kThrow);      // throws std::runtime_error
//   RM_CUDA_CHECK(cudaEventQuery(e), OpError{this, &op});     // a handler that adds context
//
// on_error(call_text, error_text) must not return: it throws or aborts. Kernel launches report
// their errors late: check cudaGetLastError() right after each launch.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#define RM_CUDA_CHECK(call, on_error)                                                 \
  do {                                                                                \
    const cudaError_t rm_cuda_rc = (call);                                            \
    if (rm_cuda_rc != cudaSuccess) (on_error)(#call, cudaGetErrorString(rm_cuda_rc)); \
  } while (0)

namespace rm::cuda {

// The plain handler: throws std::runtime_error("<call> failed: <error>").
struct ThrowError {
  [[noreturn]] void operator()(const char* call, const char* error) const {
    throw std::runtime_error(std::string(call) + " failed: " + error);
  }
};
inline constexpr ThrowError kThrow{};

}  // namespace rm::cuda

// RM_CUDA_CHECK: wrap every CUDA runtime call where it is made; failures throw with context.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace rm::cuda::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file,
                                          int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                           ")");
}

}  // namespace rm::cuda::detail

#define RM_CUDA_CHECK(expr)                                                          \
  do {                                                                               \
    const cudaError_t rm_cuda_err_ = (expr);                                         \
    if (rm_cuda_err_ != cudaSuccess) {                                               \
      ::rm::cuda::detail::throw_cuda_error(rm_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

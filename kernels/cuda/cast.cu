#include "kernels/cuda/cast.h"

#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

__global__ void __launch_bounds__(kElementwiseThreads)
    to_bf16_kernel(bf16* dst, const float* src, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    dst[i] = to_bf16(src[i]);
  }
}

__global__ void __launch_bounds__(kElementwiseThreads)
    to_float_kernel(float* dst, const bf16* src, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    dst[i] = to_float(src[i]);
  }
}

}  // namespace

void cast(bf16* dst, const float* src, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(to_bf16_kernel, elementwise_launch(n), stream, dst, src, n);
}

void cast(float* dst, const bf16* src, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(to_float_kernel, elementwise_launch(n), stream, dst, src, n);
}

}  // namespace rm::cuda

#include "kernels/cuda/reduce.h"

#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

__global__ void __launch_bounds__(kReduceThreads)
    sum_squares_kernel(double* partials, const float* x, size_t n) {
  double acc = 0.0;
  RM_GRID_STRIDE_LOOP(i, n) {
    const double v = x[i];
    acc += v * v;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kReduceThreads)
    sum_doubles_kernel(double* total, const double* x, size_t n) {
  double acc = 0.0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *total = acc;
}

__global__ void __launch_bounds__(kElementwiseThreads) scale_kernel(float* x, size_t n, float s) {
  RM_GRID_STRIDE_LOOP(i, n) {
    x[i] *= s;
  }
}

// One block for the final pass (also for n == 0, which writes 0).
constexpr LaunchShape kOneBlock{1, kReduceThreads};

}  // namespace

void sum_squares(double* total, double* partials, const float* x, size_t n, cudaStream_t stream) {
  const LaunchShape shape = reduce_launch(n);
  RM_CUDA_LAUNCH(sum_squares_kernel, shape, stream, partials, x, n);
  RM_CUDA_LAUNCH(sum_doubles_kernel, kOneBlock, stream, total, partials, size_t{shape.grid});
}

void sum_doubles(double* total, const double* x, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(sum_doubles_kernel, kOneBlock, stream, total, x, n);
}

void scale(float* x, size_t n, float s, cudaStream_t stream) {
  RM_CUDA_LAUNCH(scale_kernel, elementwise_launch(n), stream, x, n, s);
}

}  // namespace rm::cuda

#include "kernels/cuda/reduce.h"

#include <cstdint>

#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

// Per block, in double. With x 16-byte aligned, four floats a load (at one float a load the
// pass over GPT-2's 498 MB of gradients ran at under half an H200's bandwidth), the last n % 4
// elements one at a time; the order of additions depends only on n, the grid and alignment.
__global__ void __launch_bounds__(kReduceThreads)
    sum_squares_kernel(double* partials, const float* x, size_t n, bool vectors) {
  double acc = 0.0;
  size_t done = 0;
  if (vectors) {
    const size_t groups = n / 4;
    RM_GRID_STRIDE_LOOP(k, groups) {
      const float4 v = reinterpret_cast<const float4*>(x)[k];
      const double a = v.x, b = v.y, c = v.z, d = v.w;
      acc += a * a + b * b + c * c + d * d;
    }
    done = groups * 4;
  }
  RM_GRID_STRIDE_LOOP(i, n - done) {
    const double v = x[done + i];
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
  const bool vectors = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  RM_CUDA_LAUNCH(sum_squares_kernel, shape, stream, partials, x, n, vectors);
  RM_CUDA_LAUNCH(sum_doubles_kernel, kOneBlock, stream, total, partials, size_t{shape.grid});
}

void sum_doubles(double* total, const double* x, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(sum_doubles_kernel, kOneBlock, stream, total, x, n);
}

void scale(float* x, size_t n, float s, cudaStream_t stream) {
  RM_CUDA_LAUNCH(scale_kernel, elementwise_launch(n), stream, x, n, s);
}

}  // namespace rm::cuda

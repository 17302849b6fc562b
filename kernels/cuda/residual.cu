#include "kernels/cuda/residual.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    add_kernel(T* out, const T* a, const T* b, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    out[i] = store<T>(load(a[i]) + load(b[i]));
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    add_inplace_kernel(float* acc, const T* x, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    acc[i] += load(x[i]);
  }
}

}  // namespace

template <typename T>
void add(T* out, const T* a, const T* b, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(add_kernel<T>, elementwise_launch(n), stream, out, a, b, n);
}

template <typename T>
void add_inplace(float* acc, const T* x, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(add_inplace_kernel<T>, elementwise_launch(n), stream, acc, x, n);
}

template void add<float>(float*, const float*, const float*, size_t, cudaStream_t);
template void add<bf16>(bf16*, const bf16*, const bf16*, size_t, cudaStream_t);
template void add_inplace<float>(float*, const float*, size_t, cudaStream_t);
template void add_inplace<bf16>(float*, const bf16*, size_t, cudaStream_t);

}  // namespace rm::cuda

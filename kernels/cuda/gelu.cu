#include "kernels/cuda/gelu.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/elementwise_math.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_forward_kernel(T* out, const T* inp, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    out[i] = store<T>(gelu_tanh(load(inp[i])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    dinp[i] = store<T>(gelu_tanh_grad(load(inp[i])) * load(dout[i]));
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(gelu_forward_kernel<T>, elementwise_launch(n), stream, out, inp, n);
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(gelu_backward_kernel<T>, elementwise_launch(n), stream, dinp, inp, dout, n);
}

template void gelu_forward<float>(float*, const float*, size_t, cudaStream_t);
template void gelu_forward<bf16>(bf16*, const bf16*, size_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, size_t, cudaStream_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, size_t, cudaStream_t);

}  // namespace rm::cuda

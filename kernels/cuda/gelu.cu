#include "kernels/cuda/gelu.h"

#include <cstddef>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_util.h"
#include "kernels/elementwise_math.h"

namespace rm::cuda {
namespace {

__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    out[i] = gelu_tanh(inp[i]);
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    dinp[i] = gelu_tanh_grad(inp[i]) * dout[i];
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, int N, cudaStream_t stream) {
  if (N <= 0) return;
  const size_t n = static_cast<size_t>(N);
  gelu_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(out, inp, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int N, cudaStream_t stream) {
  if (N <= 0) return;
  const size_t n = static_cast<size_t>(N);
  gelu_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(dinp, inp, dout, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace rm::cuda

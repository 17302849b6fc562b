#include "kernels/cuda/embedding.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    embedding_forward_kernel(T* out, const int* tokens, const T* wte, const T* wpe, int Tn, int C,
                             size_t total) {
  RM_GRID_STRIDE_LOOP(i, total) {
    const size_t n = i / C, c = i % C;
    const float e = load(wte[static_cast<size_t>(tokens[n]) * C + c]);
    out[i] = store<T>(wpe != nullptr ? e + load(wpe[(n % Tn) * C + c]) : e);
  }
}

// Thread c owns column c of dwte: no two threads touch the same element.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    embedding_dwte_kernel(float* dwte, const T* dout, const int* tokens, int N, int C) {
  RM_GRID_STRIDE_LOOP(c, static_cast<size_t>(C)) {
    for (int n = 0; n < N; ++n) {
      dwte[static_cast<size_t>(tokens[n]) * C + c] += load(dout[static_cast<size_t>(n) * C + c]);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    embedding_dwpe_kernel(float* dwpe, const T* dout, int B, int Tn, int C) {
  RM_GRID_STRIDE_LOOP(i, static_cast<size_t>(Tn) * C) {
    float g = dwpe[i];
    for (int b = 0; b < B; ++b) g += load(dout[static_cast<size_t>(b) * Tn * C + i]);
    dwpe[i] = g;
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                       cudaStream_t stream) {
  if (B <= 0 || Tn <= 0 || C <= 0) return;
  const size_t total = static_cast<size_t>(B) * Tn * C;
  RM_CUDA_LAUNCH(embedding_forward_kernel<T>, elementwise_launch(total), stream, out, tokens, wte,
                 wpe, Tn, C, total);
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                        int C, cudaStream_t stream) {
  if (B <= 0 || Tn <= 0 || C <= 0) return;
  RM_CUDA_LAUNCH(embedding_dwte_kernel<T>, elementwise_launch(static_cast<size_t>(C)), stream, dwte,
                 dout, tokens, B * Tn, C);
  if (dwpe != nullptr) {
    RM_CUDA_LAUNCH(embedding_dwpe_kernel<T>, elementwise_launch(static_cast<size_t>(Tn) * C),
                   stream, dwpe, dout, B, Tn, C);
  }
}

template void embedding_forward<float>(float*, const int*, const float*, const float*, int, int,
                                       int, cudaStream_t);
template void embedding_forward<bf16>(bf16*, const int*, const bf16*, const bf16*, int, int, int,
                                      cudaStream_t);
template void embedding_backward<float>(float*, float*, const float*, const int*, int, int, int,
                                        cudaStream_t);
template void embedding_backward<bf16>(float*, float*, const bf16*, const int*, int, int, int,
                                       cudaStream_t);

}  // namespace rm::cuda

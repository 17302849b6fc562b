#include "kernels/cuda/context_embedding.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

// Element i of x[rows, K*E]: row r = b*Tn + t, slot j, column e.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    context_embedding_forward_kernel(T* x, const int* tokens, const T* emb, int Tn, int K, int E,
                                     size_t total) {
  const size_t KE = static_cast<size_t>(K) * E;
  RM_GRID_STRIDE_LOOP(i, total) {
    const size_t r = i / KE, rem = i % KE;
    const int t = static_cast<int>(r % Tn), j = static_cast<int>(rem / E);
    const size_t e = rem % E;
    const int src = t - K + 1 + j;
    x[i] = src < 0 ? store<T>(0.0f)
                   : emb[static_cast<size_t>(tokens[r - t + src]) * E + e];  // a copy, not rounded
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    context_embedding_backward_kernel(float* demb, const T* dx, const int* tokens, int rows, int Tn,
                                      int K, int E) {
  const size_t KE = static_cast<size_t>(K) * E;
  RM_GRID_STRIDE_LOOP(e, static_cast<size_t>(E)) {
    for (int r = 0; r < rows; ++r) {
      const int t = r % Tn;
      for (int j = 0; j < K; ++j) {
        const int src = t - K + 1 + j;
        if (src < 0) continue;
        demb[static_cast<size_t>(tokens[r - t + src]) * E + e] +=
            load(dx[static_cast<size_t>(r) * KE + static_cast<size_t>(j) * E + e]);
      }
    }
  }
}

}  // namespace

template <typename T>
void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K, int E,
                               cudaStream_t stream) {
  if (B <= 0 || Tn <= 0 || K <= 0 || E <= 0) return;
  const size_t total = static_cast<size_t>(B) * Tn * K * E;
  RM_CUDA_LAUNCH(context_embedding_forward_kernel<T>, elementwise_launch(total), stream, x, tokens,
                 emb, Tn, K, E, total);
}

template <typename T>
void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                int E, cudaStream_t stream) {
  if (B <= 0 || Tn <= 0 || K <= 0 || E <= 0) return;
  RM_CUDA_LAUNCH(context_embedding_backward_kernel<T>, elementwise_launch(static_cast<size_t>(E)),
                 stream, demb, dx, tokens, B * Tn, Tn, K, E);
}

template void context_embedding_forward<float>(float*, const int*, const float*, int, int, int, int,
                                               cudaStream_t);
template void context_embedding_forward<bf16>(bf16*, const int*, const bf16*, int, int, int, int,
                                              cudaStream_t);
template void context_embedding_backward<float>(float*, const float*, const int*, int, int, int,
                                                int, cudaStream_t);
template void context_embedding_backward<bf16>(float*, const bf16*, const int*, int, int, int, int,
                                               cudaStream_t);

}  // namespace rm::cuda

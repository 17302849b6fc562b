// The MLP model's input layer on the GPU (kernels/cpu/context_embedding.h), T = float or bf16:
//   x[b,t, j*E:(j+1)*E] = emb[tokens[b, t-K+1+j], :]   (zeros before the sequence start)
// The backward ACCUMULATES into demb deterministically: one thread per embedding column walks
// the rows and slots in the CPU's order. Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace rm::cuda {

template <typename T>
void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K, int E,
                               cudaStream_t stream);

template <typename T>
void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                int E, cudaStream_t stream);

}  // namespace rm::cuda

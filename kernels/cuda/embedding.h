// Token + position embedding on the GPU (kernels/cpu/embedding.h), T = float or bf16.
//
// The backward is deterministic and race-free without atomics, in the CPU's order of additions,
// so float results are bit-identical to it: the positions are sorted by token (a stable radix
// sort), and one thread per (token, channel) adds that token's positions in increasing order
// (dwte); one per (position, channel) walks the batch in order (dwpe). Sorting first matters:
// one thread per channel walking all B*Tn positions (the previous kernel) had 768 threads in
// all at width 768, 6.6 ms a step at GPT-2 124M's shape. Device pointers (tokens too);
// asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace rm::cuda {

template <typename T>
void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                       cudaStream_t stream);

// Bytes of device scratch embedding_backward needs for N = B * Tn positions.
size_t embedding_backward_scratch_bytes(int N);

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                        int C, void* scratch, cudaStream_t stream);

}  // namespace rm::cuda

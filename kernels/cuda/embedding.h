// Token + position embedding on the GPU (kernels/cpu/embedding.h), T = float or bf16.
//
// The backward is deterministic and race-free without atomics: one thread per channel walks all
// tokens in order (dwte), one per (position, channel) walks the batch in order (dwpe) -- the
// CPU's order of additions, so float results are bit-identical to it. Device pointers
// (tokens too); asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace rm::cuda {

template <typename T>
void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                       cudaStream_t stream);

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                        int C, cudaStream_t stream);

}  // namespace rm::cuda

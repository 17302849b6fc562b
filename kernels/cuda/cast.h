// float <-> bf16 over whole buffers on the GPU, with the conversions of kernels/bf16.h (round to
// nearest even, the bits of __float2bfloat16_rn; widening exact). Device pointers; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/bf16.h"

namespace rm::cuda {

void cast(bf16* dst, const float* src, size_t n, cudaStream_t stream);
void cast(float* dst, const bf16* src, size_t n, cudaStream_t stream);

}  // namespace rm::cuda

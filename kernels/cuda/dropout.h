// Dropout on the GPU (kernels/cpu/dropout.h): the masks of kernels/dropout_mask.h over [B, row]
// (row = Tn * C), the same bits as the cpu backend's. T = float or bf16, read in float, one
// rounding per output; out may alias in exactly. Device pointers; asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/dropout_mask.h"

namespace rm::cuda {

template <typename T>
void dropout(T* out, const T* in, const DropoutKey& key, int B, size_t row, cudaStream_t stream);

}  // namespace rm::cuda

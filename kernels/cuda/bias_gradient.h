// The bias gradient of a bf16 Linear on the GPU, dbias[c] += sum over n of dout[n, c] (fp32
// ACCUMULATED), read 16 bytes at a time: what the generic column sums (column_sums.cuh, a
// 2-byte load a thread a row) and cuBLASLt's BGRADB epilogue do at about a third of the memory
// rate (bench/cuda_linear_bench). Two passes in a fixed order, no atomics: deterministic.
//  1. A block of 32 x 8 threads takes 256 adjacent columns (8 a thread) and one chunk of
//     kColumnSumChunkRows rows; row lane y sums rows y, y + 8, ... in order; the 8 lanes are
//     added in lane order into partials[chunk][c].
//  2. One thread a column adds the chunks' partials in chunk order, then adds that to dbias.
// Takes dout 16-byte aligned with OC a multiple of 8 (bias_gradient_vectorizable); partials:
// device scratch of column_sum_shape(N, OC, 1).partial_floats floats. Asynchronous on stream.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/bf16.h"

namespace rm::cuda {

bool bias_gradient_vectorizable(int OC, const void* dout);

void bias_gradient(float* dbias, const bf16* dout, int N, int OC, float* partials,
                   cudaStream_t stream);

}  // namespace rm::cuda

// Whole-buffer reductions and scaling on the GPU (kernels/cpu/reduce.h).
//
// Sums are two-pass and deterministic for a given n: reduce_launch(n) blocks each write one
// double partial, then a single block adds the partials in a fixed tree. The result stays on
// the device (the caller downloads it, see cuda_context.h). Device pointers; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace rm::cuda {

// *total = sum_i x[i]^2 in double; partials must hold kMaxReduceBlocks doubles (launch_util.h).
void sum_squares(double* total, double* partials, const float* x, size_t n, cudaStream_t stream);

// *total = sum_i x[i], one block (for short arrays: partials, per-row losses).
void sum_doubles(double* total, const double* x, size_t n, cudaStream_t stream);

// x *= s.
void scale(float* x, size_t n, float s, cudaStream_t stream);

}  // namespace rm::cuda

// Sums down the columns of a row-major [N, C] array, K of them at once: out_k[c] += sum over n
// of term(n, c)[k] -- bias gradients (the column sums of dout) and layernorm's weight and bias
// gradients. For .cu files only.
//
// Two passes (launch_util.h: column_sum_shape), no atomics, a fixed order, so the sums are
// deterministic (bit-identical reruns, on any GPU):
//  1. A block takes kColumnSumCols adjacent columns (a warp reads 32 adjacent elements of a row)
//     and one chunk of kColumnSumChunkRows rows, in kColumnSumRows row lanes: lane y sums the
//     chunk's rows y, y + kColumnSumRows, ... in order; lane 0 adds the lanes in lane order and
//     writes the chunk's partial to scratch.
//  2. One thread per (output, column) adds the chunks' partials in chunk order, then adds the
//     total to out once.
// Why two passes: one block per 32 columns over all N rows gave C/32 = 24 blocks at width 768, a
// fifth of an H100's SMs, each reading 1 MB in turn (~0.3 ms a layernorm backward); chunks give
// 24 x 64 blocks at N = 16384.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_util.h"

namespace rm::cuda {

template <int K>
struct ColumnOutputs {
  float* out[K];  // each [C], ACCUMULATED
};

// Term: a device functor, void operator()(int n, int c, float (&t)[K]) const.
// partials: [chunks][K][C].
template <int K, typename Term>
__global__ void __launch_bounds__(kColumnSumCols* kColumnSumRows)
    column_partials_kernel(float* partials, int N, int C, Term term) {
  __shared__ float part[K][kColumnSumRows][kColumnSumCols];
  const int c = static_cast<int>(blockIdx.x * kColumnSumCols + threadIdx.x);
  const int first = static_cast<int>(blockIdx.y * kColumnSumChunkRows);
  const int last = min(N, first + static_cast<int>(kColumnSumChunkRows));
  float acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0.0f;
  if (c < C) {
    for (int n = first + static_cast<int>(threadIdx.y); n < last;
         n += static_cast<int>(kColumnSumRows)) {
      float t[K];
      term(n, c, t);
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] += t[k];
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float s = 0.0f;
      for (int y = 0; y < static_cast<int>(kColumnSumRows); ++y) s += part[k][y][threadIdx.x];
      partials[(static_cast<size_t>(blockIdx.y) * K + k) * C + c] = s;
    }
  }
}

template <int K>
__global__ void __launch_bounds__(kElementwiseThreads)
    column_totals_kernel(ColumnOutputs<K> outputs, const float* partials, int chunks, int C) {
  RM_GRID_STRIDE_LOOP(i, static_cast<size_t>(K) * C) {
    const int k = static_cast<int>(i / C), c = static_cast<int>(i % C);
    float s = 0.0f;
    for (int j = 0; j < chunks; ++j) s += partials[(static_cast<size_t>(j) * K + k) * C + c];
    outputs.out[k][c] += s;
  }
}

// partials: device scratch of at least column_sum_shape(N, C, K).partial_floats floats.
template <int K, typename Term>
void launch_column_sums(ColumnOutputs<K> outputs, float* partials, int N, int C, Term term,
                        cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const ColumnSumShape s = column_sum_shape(static_cast<size_t>(N), static_cast<size_t>(C), K);
  column_partials_kernel<K, Term>
      <<<dim3(s.column_groups, s.chunks), dim3(kColumnSumCols, kColumnSumRows), 0, stream>>>(
          partials, N, C, term);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
  const LaunchShape totals = elementwise_launch(static_cast<size_t>(K) * C);
  column_totals_kernel<K>
      <<<totals.grid, totals.block, 0, stream>>>(outputs, partials, static_cast<int>(s.chunks), C);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
}

}  // namespace rm::cuda

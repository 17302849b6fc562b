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
//  2. launch_column_totals: the chunks' partials of each (output, column), added in a fixed
//     order (row lanes, then the lanes in order), then added to out once.
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

// Pass 2: a block per 32 of the K x C (output, column) pairs, in kColumnSumRows lanes: lane y
// adds chunks y, y + kColumnSumRows, ... in order, then lane 0 adds the lanes in lane order.
// The loads are independent, so unrolling keeps several in flight (a thread summing all chunks
// alone waited one memory latency per chunk).
template <int K>
__global__ void __launch_bounds__(kColumnSumCols* kColumnSumRows)
    column_totals_kernel(ColumnOutputs<K> outputs, const float* partials, int chunks, int C) {
  __shared__ float part[kColumnSumRows][kColumnSumCols];
  const int i = static_cast<int>(blockIdx.x * kColumnSumCols + threadIdx.x);  // k * C + c
  const int k = i / C, c = i % C;
  float acc = 0.0f;
  if (i < K * C) {
#pragma unroll 8
    for (int j = static_cast<int>(threadIdx.y); j < chunks; j += static_cast<int>(kColumnSumRows)) {
      acc += partials[(static_cast<size_t>(j) * K + k) * C + c];
    }
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && i < K * C) {
    float s = 0.0f;
    for (int y = 0; y < static_cast<int>(kColumnSumRows); ++y) s += part[y][threadIdx.x];
    outputs.out[k][c] += s;
  }
}

// out_k[c] += the sum over j < chunks of partials[(j * K + k) * C + c], in a fixed order.
template <int K>
void launch_column_totals(ColumnOutputs<K> outputs, const float* partials, int chunks, int C,
                          cudaStream_t stream) {
  if (chunks <= 0 || C <= 0) return;
  const unsigned blocks =
      static_cast<unsigned>(ceil_div(static_cast<size_t>(K) * C, kColumnSumCols));
  column_totals_kernel<K>
      <<<blocks, dim3(kColumnSumCols, kColumnSumRows), 0, stream>>>(outputs, partials, chunks, C);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
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
  launch_column_totals<K>(outputs, partials, static_cast<int>(s.chunks), C, stream);
}

}  // namespace rm::cuda

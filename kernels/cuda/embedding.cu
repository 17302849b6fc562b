#include "kernels/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include "kernels/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    embedding_forward_kernel(T* out, const int* tokens, const T* wte, const T* wpe, int Tn, int C,
                             size_t total) {
  RM_GRID_STRIDE_LOOP(i, total) {
    const size_t n = i / C, c = i % C;
    const float e = load(wte[static_cast<size_t>(tokens[n]) * C + c]);
    out[i] = store<T>(wpe != nullptr ? e + load(wpe[(n % Tn) * C + c]) : e);
  }
}

__global__ void __launch_bounds__(kElementwiseThreads) iota_kernel(int* out, int n) {
  RM_GRID_STRIDE_LOOP(i, static_cast<size_t>(n)) out[i] = static_cast<int>(i);
}

// Warp w covers sorted position i = w / groups and the 32 columns of group w % groups. Only the
// warps at the first position of a token's run work: each lane sums its column over the run's
// positions in increasing order (the sort is stable), onto dwte's value -- the CPU's order of
// additions, one thread per element, no atomics.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    embedding_dwte_runs_kernel(float* dwte, const T* dout, const int* sorted_tokens,
                               const int* positions, int N, int C, int groups) {
  const size_t w = static_cast<size_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const size_t first = w / groups;
  if (first >= static_cast<size_t>(N)) return;
  const int token = sorted_tokens[first];
  if (first > 0 && sorted_tokens[first - 1] == token) return;  // not the run's first position
  const int c = static_cast<int>(w % groups) * 32 + static_cast<int>(threadIdx.x % 32);
  if (c >= C) return;
  size_t end = first + 1;
  while (end < static_cast<size_t>(N) && sorted_tokens[end] == token) ++end;
  float* g = dwte + static_cast<size_t>(token) * C + c;
  float acc = *g;
#pragma unroll 8
  for (size_t i = first; i < end; ++i) acc += load(dout[static_cast<size_t>(positions[i]) * C + c]);
  *g = acc;
}

// The token-sorted order's buffers inside embedding_backward's scratch, each 256-byte aligned.
struct SortBuffers {
  size_t sorted_tokens = 0, positions = 0, sorted_positions = 0, temp = 0;
  size_t temp_bytes = 0, total = 0;
};

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

SortBuffers sort_buffers(int N) {
  SortBuffers b;
  size_t temp = 0;
  RM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
                    nullptr, temp, static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
                    static_cast<const int*>(nullptr), static_cast<int*>(nullptr), N),
                kThrow);
  const size_t ints = align256(static_cast<size_t>(N) * sizeof(int));
  b.positions = ints;
  b.sorted_positions = 2 * ints;
  b.temp = 3 * ints;
  b.temp_bytes = temp;
  b.total = 3 * ints + align256(temp);
  return b;
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    embedding_dwpe_kernel(float* dwpe, const T* dout, int B, int Tn, int C) {
  RM_GRID_STRIDE_LOOP(i, static_cast<size_t>(Tn) * C) {
    float g = dwpe[i];
    for (int b = 0; b < B; ++b) g += load(dout[static_cast<size_t>(b) * Tn * C + i]);
    dwpe[i] = g;
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                       cudaStream_t stream) {
  if (B <= 0 || Tn <= 0 || C <= 0) return;
  const size_t total = static_cast<size_t>(B) * Tn * C;
  RM_CUDA_LAUNCH(embedding_forward_kernel<T>, elementwise_launch(total), stream, out, tokens, wte,
                 wpe, Tn, C, total);
}

size_t embedding_backward_scratch_bytes(int N) {
  return N > 0 ? sort_buffers(N).total : 0;
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                        int C, void* scratch, cudaStream_t stream) {
  if (B <= 0 || Tn <= 0 || C <= 0) return;
  const int N = B * Tn;
  const SortBuffers b = sort_buffers(N);
  char* base = static_cast<char*>(scratch);
  int* sorted_tokens = reinterpret_cast<int*>(base + b.sorted_tokens);
  int* positions = reinterpret_cast<int*>(base + b.positions);
  int* sorted_positions = reinterpret_cast<int*>(base + b.sorted_positions);
  RM_CUDA_LAUNCH(iota_kernel, elementwise_launch(static_cast<size_t>(N)), stream, positions, N);
  size_t temp_bytes = b.temp_bytes;
  // LSD radix sort: stable, so a token's positions stay in increasing order.
  RM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + b.temp, temp_bytes, tokens, sorted_tokens,
                                                positions, sorted_positions, N, 0,
                                                static_cast<int>(sizeof(int) * 8), stream),
                kThrow);
  const int groups = static_cast<int>(ceil_div(static_cast<size_t>(C), kWarpSize));
  RM_CUDA_LAUNCH(embedding_dwte_runs_kernel<T>,
                 warp_per_row_launch(static_cast<size_t>(N) * groups), stream, dwte, dout,
                 sorted_tokens, sorted_positions, N, C, groups);
  if (dwpe != nullptr) {
    RM_CUDA_LAUNCH(embedding_dwpe_kernel<T>, elementwise_launch(static_cast<size_t>(Tn) * C),
                   stream, dwpe, dout, B, Tn, C);
  }
}

template void embedding_forward<float>(float*, const int*, const float*, const float*, int, int,
                                       int, cudaStream_t);
template void embedding_forward<bf16>(bf16*, const int*, const bf16*, const bf16*, int, int, int,
                                      cudaStream_t);
template void embedding_backward<float>(float*, float*, const float*, const int*, int, int, int,
                                        void*, cudaStream_t);
template void embedding_backward<bf16>(float*, float*, const bf16*, const int*, int, int, int,
                                       void*, cudaStream_t);

}  // namespace rm::cuda

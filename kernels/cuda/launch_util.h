// Internal launch helpers for the CUDA kernels (not part of the public API).
#pragma once

#include <algorithm>
#include <cstddef>

namespace rm::cuda::detail {

constexpr int kThreads = 256;
// Element-wise kernels use grid-stride loops: a capped grid covers any n (size_t) and keeps all
// blocks resident on large GPUs.
constexpr size_t kMaxBlocks = 4096;

inline unsigned blocks_for(size_t n) {
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min(kMaxBlocks, (n + kThreads - 1) / kThreads)));
}

}  // namespace rm::cuda::detail

// for (size_t i = <global thread index>; i < n; i += <grid size>)
#define RM_GRID_STRIDE_LOOP(i, n)                                         \
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += size_t{blockDim.x} * gridDim.x)

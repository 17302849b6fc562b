// Launch shapes of the CUDA kernels, as plain host functions (no CUDA headers) so that the
// geometry is unit-tested on machines without a GPU (launch_util_test.cc).
//
// Three kinds of kernel, each with its shape function:
//  - element-wise / per-column: a grid-stride loop over n items; the grid is capped, so any n
//    (size_t) is covered and the blocks stay resident on large GPUs.
//  - per-row: one block per row, the block's threads stride over the row and cooperate through
//    the block reductions of kernel_util.cuh, which need a whole number of warps.
//  - two-pass reductions: a capped number of blocks writes one partial each, one block sums the
//    partials in a fixed order (deterministic for a given n).
// A shape with grid == 0 means there is nothing to launch (a zero-sized grid is a launch error).
// Kernels declare __launch_bounds__ with the matching maximum, so the compiler never uses more
// registers than a block of that size can have.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace rm::cuda {

struct LaunchShape {
  unsigned grid = 0;   // blocks (x only); 0: skip the launch
  unsigned block = 0;  // threads per block
};

inline constexpr unsigned kWarpSize = 32;
inline constexpr unsigned kElementwiseThreads = 256;
inline constexpr unsigned kMaxElementwiseBlocks = 4096;
inline constexpr unsigned kMaxRowThreads = 1024;  // the CUDA limit of threads per block
inline constexpr unsigned kReduceThreads = 256;
inline constexpr unsigned kMaxReduceBlocks = 1024;  // size of the partials buffer
inline constexpr size_t kMaxGridX = 2147483647;     // 2^31 - 1, gridDim.x's limit

inline size_t ceil_div(size_t a, size_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// n items, grid-stride.
inline LaunchShape elementwise_launch(size_t n) {
  if (n == 0) return {};
  const size_t blocks = ceil_div(n, kElementwiseThreads);
  return {static_cast<unsigned>(blocks < kMaxElementwiseBlocks ? blocks : kMaxElementwiseBlocks),
          kElementwiseThreads};
}

// One block per row of row_len items: the row rounded up to whole warps, at most
// kMaxRowThreads (threads then stride over the row). Throws std::invalid_argument when there
// are more rows than a grid can have.
inline LaunchShape row_launch(size_t rows, size_t row_len) {
  if (rows > kMaxGridX) {
    throw std::invalid_argument("rm::cuda: " + std::to_string(rows) +
                                " rows exceed the grid limit of one block per row");
  }
  if (rows == 0) return {};
  const size_t warps = ceil_div(row_len == 0 ? 1 : row_len, kWarpSize);
  const size_t threads = warps * kWarpSize;
  return {static_cast<unsigned>(rows),
          static_cast<unsigned>(threads < kMaxRowThreads ? threads : kMaxRowThreads)};
}

// First pass of a two-pass reduction over n items: at most kMaxReduceBlocks partials.
inline LaunchShape reduce_launch(size_t n) {
  if (n == 0) return {};
  const size_t blocks = ceil_div(n, kReduceThreads);
  return {static_cast<unsigned>(blocks < kMaxReduceBlocks ? blocks : kMaxReduceBlocks),
          kReduceThreads};
}

// One warp per row, kElementwiseThreads / 32 rows a block (warp reductions only, no block-wide
// cooperation: a warp past the last row returns at once). Throws std::invalid_argument when the
// rows need more blocks than a grid can have.
inline LaunchShape warp_per_row_launch(size_t rows) {
  if (rows == 0) return {};
  const size_t blocks = ceil_div(rows, kElementwiseThreads / kWarpSize);
  if (blocks > kMaxGridX) {
    throw std::invalid_argument("rm::cuda: " + std::to_string(rows) +
                                " rows exceed the grid limit of one warp per row");
  }
  return {static_cast<unsigned>(blocks), kElementwiseThreads};
}

// Column sums (column_sums.cuh) in two passes: the rows are cut into chunks of
// kColumnSumChunkRows, and each (32-column group, chunk) block writes one partial per column and
// output; a second pass adds each column's partials in chunk order. The first pass's grid and the
// scratch it needs, in floats, for K outputs over an [N, C] array.
inline constexpr size_t kColumnSumCols = 32;
inline constexpr size_t kColumnSumRows = 16;        // row lanes of a first-pass block
inline constexpr size_t kColumnSumChunkRows = 256;  // rows of one chunk
struct ColumnSumShape {
  unsigned column_groups = 0;  // gridDim.x of the first pass; 0: nothing to launch
  unsigned chunks = 0;         // gridDim.y
  size_t partial_floats = 0;   // chunks * K * C
};
inline ColumnSumShape column_sum_shape(size_t N, size_t C, size_t K) {
  if (N == 0 || C == 0 || K == 0) return {};
  const size_t chunks = ceil_div(N, kColumnSumChunkRows);
  if (chunks > 65535) {  // gridDim.y's limit: 16.7 M rows
    throw std::invalid_argument("rm::cuda: " + std::to_string(N) +
                                " rows exceed the column sums' limit of 65535 chunks");
  }
  const size_t groups = ceil_div(C, kColumnSumCols);
  if (groups > kMaxGridX) {
    throw std::invalid_argument("rm::cuda: " + std::to_string(C) + " columns exceed the grid");
  }
  return {static_cast<unsigned>(groups), static_cast<unsigned>(chunks), chunks * K * C};
}

}  // namespace rm::cuda

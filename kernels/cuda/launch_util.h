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
#include <vector>

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

// Row kernels that keep a row in registers, 16-byte vectors of `elem_bytes`-byte elements, one
// warp per row (layernorm.cu): a row of C elements is C / (32 * 16 / elem_bytes) vectors a
// lane. Returns that count when C divides evenly and it is at most kMaxRowVectors, else 0 (the
// kernels then take their general path).
inline constexpr int kMaxRowVectors = 8;
inline int row_vectors_per_lane(size_t C, size_t elem_bytes) {
  const size_t per_warp = kWarpSize * (16 / elem_bytes);
  if (C == 0 || C % per_warp != 0 || C / per_warp > kMaxRowVectors) return 0;
  return static_cast<int>(C / per_warp);
}
// layernorm's fused backward: a fixed number of warps for N rows (at most
// kLayerNormBackwardWarps), each striding over the rows and keeping its weight and bias
// gradients' partial sums in registers; one partial per warp, summed in warp order afterwards.
// A function of N only, so the sums are the same on every GPU.
inline constexpr size_t kLayerNormBackwardWarps = 1024;
inline LaunchShape layernorm_backward_launch(size_t N) {
  const size_t warps = N < kLayerNormBackwardWarps ? N : kLayerNormBackwardWarps;
  return warp_per_row_launch(warps);
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

// adamw_update_ranges on cuda: each range cut into chunks of at most kAdamWChunk elements, one
// block a chunk, so one launch covers every tensor whatever its size.
inline constexpr size_t kAdamWChunk = 32768;
struct AdamWChunk {
  size_t offset = 0;  // into params, grads, m, v
  unsigned n = 0;     // 1..kAdamWChunk
  int decay = 0;      // 1: the weight-decay coefficients
  bool operator==(const AdamWChunk& o) const {
    return offset == o.offset && n == o.n && decay == o.decay;
  }
};
// Ranges given as (offset, n, decay) triples of any type with those members.
template <typename Range>
std::vector<AdamWChunk> adamw_chunks(const std::vector<Range>& ranges) {
  std::vector<AdamWChunk> chunks;
  for (const Range& r : ranges) {
    for (size_t done = 0; done < r.n; done += kAdamWChunk) {
      const size_t n = r.n - done < kAdamWChunk ? r.n - done : kAdamWChunk;
      chunks.push_back({r.offset + done, static_cast<unsigned>(n), r.decay ? 1 : 0});
    }
  }
  if (chunks.size() > kMaxGridX) {
    throw std::invalid_argument("rm::cuda: too many AdamW chunks for one grid");
  }
  return chunks;
}

// Floats of scratch layernorm_backward needs (either path: the fused one's per-warp partials,
// or the general one's column sums).
inline size_t layernorm_backward_partial_floats(size_t N, size_t C) {
  const LaunchShape fused = layernorm_backward_launch(N);
  const size_t warps = size_t{fused.grid} * fused.block / kWarpSize;
  const size_t general = column_sum_shape(N, C, 2).partial_floats;
  return warps * 2 * C > general ? warps * 2 * C : general;
}

}  // namespace rm::cuda

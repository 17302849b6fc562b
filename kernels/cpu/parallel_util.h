// Internal helpers shared by the CPU kernel implementations (not part of the public API).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>

namespace rm::cpu::detail {

// Below this many elements of element-wise work, an OpenMP fork/join (a few microseconds) costs
// more than the loop itself; such loops run on the calling thread.
inline constexpr size_t kMinParallelElems = size_t{1} << 15;

// Column blocks for reductions over rows (bias/weight gradients): each block is owned by one
// thread, which sums its columns over all rows in a fixed order. That is race-free without
// per-thread scratch and gives the same bits for any thread count. 128 floats = 8 cache lines,
// so neighbouring blocks never share a line.
inline constexpr int kColBlock = 128;

inline int num_col_blocks(int C) {
  return (C + kColBlock - 1) / kColBlock;
}

inline size_t row_offset(int row, int width) {
  return static_cast<size_t>(row) * static_cast<size_t>(width);
}

// max(x[0..n)), -inf for n == 0. GCC does not vectorise a float max *reduction* without
// -ffinite-math-only (even under `omp simd reduction(max)`: measured 5x slower), but it does
// vectorise an element-wise max into 16 independent lanes, reduced at the end.
inline float max_of(const float* __restrict x, int n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], x[j + l]);
  }
  for (; j < n; ++j) lanes[0] = std::max(lanes[0], x[j]);
  float m = lanes[0];
  for (int l = 1; l < kLanes; ++l) m = std::max(m, lanes[l]);
  return m;
}

}  // namespace rm::cpu::detail

// Launch shapes (launch_util.h), checked on the host: empty and huge sizes, limits, and that a
// grid-stride loop over the shape visits every index exactly once.
#include "kernels/cuda/launch_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace rm::cuda {
namespace {

// What RM_GRID_STRIDE_LOOP does, for every thread of the grid.
std::vector<int> visits(LaunchShape s, size_t n) {
  std::vector<int> count(n, 0);
  const size_t threads = size_t{s.grid} * s.block;
  for (size_t tid = 0; tid < threads; ++tid) {
    for (size_t i = tid; i < n; i += threads) ++count[i];
  }
  return count;
}

TEST(LaunchUtil, ElementwiseEmptyLaunchesNothing) {
  EXPECT_EQ(elementwise_launch(0).grid, 0u);
}

TEST(LaunchUtil, ElementwiseCoversEveryIndexOnce) {
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{100003},
                   size_t{kElementwiseThreads} * kMaxElementwiseBlocks + 17}) {
    const LaunchShape s = elementwise_launch(n);
    ASSERT_GT(s.grid, 0u);
    EXPECT_EQ(s.block, kElementwiseThreads);
    EXPECT_LE(s.grid, kMaxElementwiseBlocks);
    const std::vector<int> v = visits(s, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 1) << "n=" << n << " i=" << i;
  }
}

TEST(LaunchUtil, ElementwiseHugeNIsCapped) {
  for (size_t n : {size_t{1} << 32, size_t{1} << 40, SIZE_MAX}) {
    const LaunchShape s = elementwise_launch(n);
    EXPECT_EQ(s.grid, kMaxElementwiseBlocks);
    EXPECT_EQ(s.block, kElementwiseThreads);
  }
  EXPECT_EQ(elementwise_launch(1).grid, 1u);
  EXPECT_EQ(elementwise_launch(kElementwiseThreads + 1).grid, 2u);
}

TEST(LaunchUtil, RowBlocksAreWholeWarpsWithinLimits) {
  struct Case {
    size_t len;
    unsigned block;
  };
  for (const Case c :
       {Case{0, 32}, Case{1, 32}, Case{32, 32}, Case{33, 64}, Case{768, 768}, Case{1000, 1024},
        Case{1024, 1024}, Case{1025, 1024}, Case{50257, 1024}, Case{size_t{1} << 40, 1024}}) {
    const LaunchShape s = row_launch(7, c.len);
    EXPECT_EQ(s.grid, 7u);
    EXPECT_EQ(s.block, c.block) << "row_len " << c.len;
    EXPECT_EQ(s.block % kWarpSize, 0u);
    EXPECT_LE(s.block, kMaxRowThreads);
  }
}

TEST(LaunchUtil, RowLimits) {
  EXPECT_EQ(row_launch(0, 100).grid, 0u);
  EXPECT_EQ(row_launch(kMaxGridX, 100).grid, static_cast<unsigned>(kMaxGridX));
  EXPECT_THROW(row_launch(kMaxGridX + 1, 100), std::invalid_argument);
}

TEST(LaunchUtil, ReduceFitsThePartialsBuffer) {
  EXPECT_EQ(reduce_launch(0).grid, 0u);
  EXPECT_EQ(reduce_launch(1).grid, 1u);
  for (size_t n : {size_t{1000}, size_t{1} << 20, size_t{1} << 40, SIZE_MAX}) {
    const LaunchShape s = reduce_launch(n);
    EXPECT_GE(s.grid, 1u);
    EXPECT_LE(s.grid, kMaxReduceBlocks);
    EXPECT_EQ(s.block, kReduceThreads);
    EXPECT_EQ(s.block % kWarpSize, 0u);
  }
  const LaunchShape s = reduce_launch(300000);
  const std::vector<int> v = visits(s, 300000);
  for (int c : v) ASSERT_EQ(c, 1);
}

TEST(LaunchUtil, WarpPerRowGivesEveryRowOneWarp) {
  EXPECT_EQ(warp_per_row_launch(0).grid, 0u);
  for (size_t rows : {size_t{1}, size_t{8}, size_t{9}, size_t{16384}}) {
    const LaunchShape s = warp_per_row_launch(rows);
    const size_t warps = size_t{s.grid} * s.block / kWarpSize;
    EXPECT_EQ(s.block % kWarpSize, 0u);
    EXPECT_GE(warps, rows);
    EXPECT_LT(warps - rows, s.block / kWarpSize);  // no block without a row
  }
  EXPECT_THROW(warp_per_row_launch(size_t{1} << 40), std::invalid_argument);
}

TEST(LaunchUtil, RowVectorsOnlyForWholeVectorsPerLane) {
  EXPECT_EQ(row_vectors_per_lane(768, 2), 3);   // GPT-2 124M, bf16: 3 x 8 elements a lane
  EXPECT_EQ(row_vectors_per_lane(768, 4), 6);   // fp32: 6 x 4
  EXPECT_EQ(row_vectors_per_lane(2048, 2), 8);  // the largest the kernels are built for
  EXPECT_EQ(row_vectors_per_lane(4096, 2), 0);
  EXPECT_EQ(row_vectors_per_lane(1600, 2), 0);  // GPT-2 XL: not whole vectors a lane
  EXPECT_EQ(row_vectors_per_lane(64, 2), 0);
  EXPECT_EQ(row_vectors_per_lane(0, 2), 0);
  // The fused backward's warps depend on N only, at most kLayerNormBackwardWarps.
  EXPECT_EQ(layernorm_backward_launch(0).grid, 0u);
  EXPECT_EQ(layernorm_backward_launch(5).grid, 1u);
  const LaunchShape big = layernorm_backward_launch(16384);
  EXPECT_EQ(size_t{big.grid} * big.block / kWarpSize, kLayerNormBackwardWarps);
}

TEST(LaunchUtil, AdamWChunksCoverEveryRangeOnceInOrder) {
  struct Range {
    size_t offset, n;
    bool decay;
  };
  const std::vector<Range> ranges = {{0, 768, false},
                                     {768, 3 * kAdamWChunk + 5, true},
                                     {768 + 3 * kAdamWChunk + 5, kAdamWChunk, false},
                                     {900000000, 1, true}};
  const std::vector<AdamWChunk> chunks = adamw_chunks(ranges);
  ASSERT_EQ(chunks.size(), 1u + 4u + 1u + 1u);
  size_t i = 0;
  for (const Range& r : ranges) {
    size_t covered = 0;
    while (covered < r.n) {
      ASSERT_LT(i, chunks.size());
      EXPECT_EQ(chunks[i].offset, r.offset + covered);
      EXPECT_GE(chunks[i].n, 1u);
      EXPECT_LE(chunks[i].n, kAdamWChunk);
      EXPECT_EQ(chunks[i].decay, r.decay ? 1 : 0);
      covered += chunks[i].n;
      ++i;
    }
    EXPECT_EQ(covered, r.n);
  }
  EXPECT_EQ(i, chunks.size());
  EXPECT_TRUE(adamw_chunks(std::vector<Range>{}).empty());
  EXPECT_TRUE(adamw_chunks(std::vector<Range>{{5, 0, true}}).empty());  // empty ranges vanish
}

TEST(LaunchUtil, ColumnSumsCoverEveryCellOnceAndSizeTheirScratch) {
  EXPECT_EQ(column_sum_shape(0, 768, 2).column_groups, 0u);
  EXPECT_EQ(column_sum_shape(16384, 0, 1).chunks, 0u);
  for (size_t N : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{16384}}) {
    for (size_t C : {size_t{7}, size_t{32}, size_t{768}, size_t{3073}}) {
      const ColumnSumShape s = column_sum_shape(N, C, 2);
      // Every row is in exactly one chunk and every column in exactly one group.
      EXPECT_GE(s.chunks * kColumnSumChunkRows, N);
      EXPECT_LT((s.chunks - 1) * kColumnSumChunkRows, N);
      EXPECT_GE(s.column_groups * kColumnSumCols, C);
      EXPECT_LT((s.column_groups - 1) * kColumnSumCols, C);
      EXPECT_EQ(s.partial_floats, s.chunks * 2 * C);
    }
  }
  // At GPT-2's shape the first pass has enough blocks for a 132-SM GPU (the one-pass kernel had
  // 24) and its scratch is small.
  const ColumnSumShape g = column_sum_shape(16384, 768, 2);
  EXPECT_EQ(g.column_groups * g.chunks, 24u * 64u);
  EXPECT_EQ(g.partial_floats * sizeof(float), 64u * 2 * 768 * 4);
  EXPECT_THROW(column_sum_shape(size_t{1} << 40, 8, 1), std::invalid_argument);
}

}  // namespace
}  // namespace rm::cuda

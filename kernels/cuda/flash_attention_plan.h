// The host-side arithmetic of the bf16 flash attention (flash_attention.h): which shapes it
// takes, the buffers it needs, its launch grids, its shared-memory layout, and the per-element
// math of the online softmax and of the backward's score gradients. Plain header-only C++ (no
// CUDA headers), so that
//  - flash_attention_plan_test.cc checks all of it on machines without a GPU, including a host
//    emulation of the kernels' tile loops (the same tile ranges, masks and element math) against
//    the cpu reference attention;
//  - the memory estimate (planning/memory_estimate.cc) sizes a cuda bf16 job's attention buffers
//    with the very functions the backend uses, in builds without CUDA too.
//
// Tiling (FlashAttention-2): a block of kFlashWarps warps handles flash_forward_rows() query
// rows (forward) or flash_backward_rows() key rows (dK/dV) or query rows (dQ) of one (batch,
// head); each warp owns 16 of those rows (one m16n8k16 tensor-core fragment high) or a multiple.
// Key and query tiles are both kFlashTile long, so under the causal mask query tile qt sees key
// tiles 0..qt and key tile kt is seen by query tiles kt..nq-1; only the diagonal tile is partly
// masked (the kernels test each element there and in tiles with rows past Tn only).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "kernels/host_device.h"
#include "kernels/layer_kernels.h"

namespace rm::cuda {

inline constexpr int kFlashTile = 64;  // query rows and key rows per tile
inline constexpr int kFlashWarps = kFlashTile / 16;
inline constexpr int kFlashThreads = kFlashWarps * 32;
// The forward's row fragments a warp: two m16 fragments (32 rows) up to head size 80, so every K
// and V fragment a warp loads from shared memory serves two products; one above (two would
// spill registers: 255 a thread hold the two fragments' accumulators only up to hs 80).
RM_HOST_DEVICE inline constexpr int flash_forward_fragments(int hs) {
  return hs <= 80 ? 2 : 1;
}
// The forward's query rows a block; kFlashForwardRows the most (head sizes up to 80).
RM_HOST_DEVICE inline constexpr int flash_forward_rows(int hs) {
  return 16 * kFlashWarps * flash_forward_fragments(hs);
}
inline constexpr int kFlashForwardRows = 2 * kFlashTile;
// The backward kernels' row fragments a warp: 1 (16 rows a warp, 64 a block) or, up to head size
// 64, 2 (32 rows a warp, 128 a block, their tiles in the two stages' regions): the dK/dV kernel's
// keys, the dQ kernel's queries. With 2 every fragment of the walked tiles a warp loads from
// shared memory serves two of its own: half the shared-memory reads a flop (the dK/dV kernel is
// bound by them at 1), at 2 blocks an SM instead of 3. The launcher takes 1 unless
// RM_FLASH_DKV_FRAGMENTS=2 / RM_FLASH_DQ_FRAGMENTS=2 (flash_attention.h); both give the same bits.
RM_HOST_DEVICE inline constexpr int flash_backward_max_fragments(int hs) {
  return hs <= 64 ? 2 : 1;
}
RM_HOST_DEVICE inline constexpr int flash_backward_rows(int fragments) {
  return 16 * kFlashWarps * fragments;
}
// The walked tile's rows a kernel takes at a time (its score fragments live for that many): the
// dK/dV kernel half a query tile with one fragment a warp, a quarter with two; the dQ kernel a
// whole key tile with one, half with two (the same registers either way).
RM_HOST_DEVICE inline constexpr int flash_dkv_columns(int fragments) {
  return kFlashTile / (2 * fragments);
}
RM_HOST_DEVICE inline constexpr int flash_dq_columns(int fragments) {
  return kFlashTile / fragments;
}

// What a backward warp does with keys [key_lo, key_hi] against queries [query_lo, query_hi] (its
// own rows against a walked tile's): kSkip when every key lies after every query (all masked: it
// would add zeros), kMasked when some key lies after some query or a query row is past Tn,
// kWhole otherwise (every pair visible: no per-element test).
enum class FlashTileWork { kSkip, kMasked, kWhole };
RM_HOST_DEVICE inline FlashTileWork flash_tile_work(int key_lo, int key_hi, int query_lo,
                                                    int query_hi, int Tn) {
  if (key_lo > query_hi) return FlashTileWork::kSkip;
  if (key_hi > query_lo || query_hi >= Tn) return FlashTileWork::kMasked;
  return FlashTileWork::kWhole;
}
inline constexpr int kFlashMaxHeadSize = 128;
inline constexpr int kFlashGridYLimit = 65535;             // gridDim.y's limit (query / key tiles)
inline constexpr long long kFlashGridXLimit = 2147483647;  // gridDim.x's (batch x heads)

// Whether the flash kernels take this shape: bf16 storage and a head size (C/H) that is a
// multiple of 16 (whole tensor-core fragments) up to kFlashMaxHeadSize. It does not depend on B
// or Tn, so a buffer planned for the largest call serves every smaller one.
inline bool flash_attention_supported(bool bf16_storage, int C, int H) {
  if (!bf16_storage || H <= 0 || C <= 0 || C % H != 0) return false;
  const int hs = C / H;
  return hs % 16 == 0 && hs <= kFlashMaxHeadSize;
}

// Buffers, in bf16 elements (the model plans them as T = bf16 arrays):
//  saved   (attention_forward's `att`): the base-2 log-sum-exp of each row's scaled scores,
//          float [B,H,Tn];
//  scratch (attention_backward's `datt_scratch`): D = rowsum(dO * O), float [B,H,Tn].
// dQ needs no float accumulator: dQ and dK/dV are computed by separate kernels (no atomics, so
// the backward is deterministic).
inline AttentionBuffers flash_attention_buffers(size_t B, size_t Tn, size_t H) {
  const size_t floats = B * H * Tn;
  return {2 * floats, 2 * floats};  // a float is 2 bf16 elements
}

RM_HOST_DEVICE inline int flash_tiles(int Tn, int rows = kFlashTile) {
  return Tn <= 0 ? 0 : (Tn + rows - 1) / rows;
}

// The grid of the three tile kernels: x = B*H (one (batch, head) per column of blocks), y = the
// query tiles (forward, dQ) or key tiles (dK/dV). Block kFlashThreads threads. grid_x == 0:
// nothing to launch. Throws std::invalid_argument beyond CUDA's grid limits.
struct FlashGrid {
  unsigned x = 0, y = 0;
};
// `rows`: the rows of one block's tile (kFlashTile; the forward's kFlashForwardRows).
inline FlashGrid flash_grid(int B, int Tn, int H, int rows = kFlashTile) {
  const long long bh = static_cast<long long>(B) * H;
  const int tiles = flash_tiles(Tn, rows);
  if (bh <= 0 || tiles == 0) return {};
  if (bh > kFlashGridXLimit || tiles > kFlashGridYLimit) {
    throw std::invalid_argument("rm::cuda flash attention: B*H=" + std::to_string(bh) +
                                " or T=" + std::to_string(Tn) + " exceeds the grid limits");
  }
  return {static_cast<unsigned>(bh), static_cast<unsigned>(tiles)};
}

// The D = rowsum(dO * O) kernel: one warp per row of [B,H,Tn], kFlashRowsPerBlock rows a block.
inline constexpr int kFlashRowsPerBlock = 8;
inline unsigned flash_rowsum_blocks(size_t rows) {
  const size_t blocks = (rows + kFlashRowsPerBlock - 1) / kFlashRowsPerBlock;
  if (blocks > static_cast<size_t>(kFlashGridXLimit)) {
    throw std::invalid_argument("rm::cuda flash attention: too many rows for one grid");
  }
  return static_cast<unsigned>(blocks);
}

// Shared memory of one block, byte offsets from the (128-byte aligned) dynamic shared memory:
// tiles of kFlashTile rows x hs bf16 with row pitch ld_tile = hs + 8 elements, and in the
// backward the tile's rows' lse and D. Everything else (scores, probabilities, accumulators)
// lives in registers (flash_attention.cu). The pitch keeps every row 16-byte aligned for the
// vector copies and ldmatrix (2 * (hs + 8) bytes, a multiple of 16 for hs a multiple of 8) and
// staggers the banks by 16 bytes a row, so the 32-bit fragment loads of 8 rows x 4 columns hit
// 32 different banks (flash_attention_plan_test.cc checks both).
//
// Two stages: the set of regions twice, the second `stage` bytes after the first. The tiles a
// kernel walks over (K and V in the forward and dQ kernels; Q, dO, lse and D in the dK/dV one)
// are copied asynchronously (cp.async) into one stage while the block computes on the other.
struct FlashSmem {
  int ld_tile = 0;
  // Offsets in stage 0: Q, K, V, dO tiles; lse and D rows (kFlashTile floats each). The forward
  // has no dO, lse or D (offset 0, unused).
  size_t q = 0, k = 0, v = 0, dout = 0, lse = 0, d = 0;
  size_t stage = 0;  // stage 1's offsets are stage 0's plus this
  size_t bytes = 0;  // the total (2 stages), for the launch
};
inline FlashSmem flash_smem(int hs, bool backward) {
  const size_t kAlign = 128;
  auto round_up = [&](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  FlashSmem s;
  s.ld_tile = hs + 8;
  const size_t tile = round_up(static_cast<size_t>(kFlashTile) * s.ld_tile * 2);
  size_t at = 0;
  auto take = [&](size_t n) {
    const size_t here = at;
    at += round_up(n);
    return here;
  };
  // The forward's Q region holds its flash_forward_rows(hs) rows (stage 1's is unused).
  s.q =
      take(backward ? tile : round_up(static_cast<size_t>(flash_forward_rows(hs)) * s.ld_tile * 2));
  s.k = take(tile);
  s.v = take(tile);
  if (backward) {
    s.dout = take(tile);
    s.lse = take(kFlashTile * 4);
    s.d = take(kFlashTile * 4);
  }
  s.stage = at;
  s.bytes = 2 * at;
  return s;
}

// log2(e) * 1/sqrt(hs): the kernels work in base 2 (flash_exp2), so scores are scaled by this.
inline float flash_scale_log2(int hs) {
  return static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(hs)));
}

// ---- Element math, shared by the kernels and the host emulation ---------------------------

// 2^x. On the device one special-function instruction with subnormal results flushed to zero
// (ex2.approx.ftz.f32: MUFU.EX2 alone). exp2f compiles to ex2.approx.f32, the same
// approximation, which handles subnormals with a compare and two multiplies around it: three
// instructions more per score, in the kernels' innermost loops (sm_90, head size 64: the
// forward's code is 8% shorter without them, the dK/dV kernel's 11%, the dQ kernel's 13%).
// What ftz changes is beyond what the kernels can tell: a probability below 2^-126 beside its
// row's largest one, which is 1 (forward) or at least 1/T (backward), adds nothing to a float
// sum, and a rescale factor below 2^-126 scales an accumulator as 0 would. The host (the
// emulation) keeps exp2f.
RM_HOST_DEVICE inline float flash_exp2(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// One step of the online softmax of a row: its running maximum m and sum l (base 2, over the
// scaled scores x) take in a tile whose largest scaled score is tile_max; returns the factor
// alpha by which the row's earlier sum and output accumulator shrink (0 on the first tile).
// m must end finite: every causal row has key 0 in its first tile.
RM_HOST_DEVICE inline float flash_rescale(float* m, float tile_max) {
  const float m_new = tile_max > *m ? tile_max : *m;
  const float alpha = flash_exp2(*m - m_new);  // exp2(-inf) = 0 on the first tile
  *m = m_new;
  return alpha;
}

// The forward's P[i,j] = 2^(x - m) of a raw score s (x = s * scale_log2) against the row's
// running maximum m of x: the scale and the subtraction in one fused multiply-add (the maximum
// is taken over raw scores and scaled once: scaling by a positive factor keeps the order, so it
// is the maximum of the scaled ones, bit for bit). A masked score is -inf: P is 0.
RM_HOST_DEVICE inline float flash_forward_prob(float score, float scale_log2, float m) {
  return flash_exp2(fmaf(score, scale_log2, -m));
}

// P[i,j] from the kept log-sum-exp (base 2); 0 where masked. One explicit fused multiply-add,
// as in the forward: left as a multiply and a subtraction, whether ptxas fuses them is its
// choice, made apart in each code path, and the dQ kernel takes the masked or the whole-tile path
// per warp, so its row-fragment settings (RM_FLASH_DQ_FRAGMENTS) could differ in the last bit.
RM_HOST_DEVICE inline float flash_prob(float score, float scale_log2, float lse2, bool visible) {
  return visible ? flash_exp2(fmaf(score, scale_log2, -lse2)) : 0.0f;
}

// dS[i,j] = P (dP - D_i), the gradient of the (unscaled-by-softmax) score; the scale 1/sqrt(hs)
// is applied to dQ and dK once, at the end.
RM_HOST_DEVICE inline float flash_dscore(float p, float dp, float d) {
  return p * (dp - d);
}

}  // namespace rm::cuda

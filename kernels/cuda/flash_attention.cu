#include "kernels/cuda/flash_attention.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/gpu_switches.h"

namespace rm::cuda {
namespace {

using bf = __nv_bfloat16;

// ---- Block-level copies ------------------------------------------------------------------

// tile[r, :] = src[(row0 + r) * ld, 0:HS] for the kFlashTile rows, zeros past Tn. 16-byte copies
// (src rows and the tile's pitch are multiples of 8 elements; the launcher checks alignment).
template <int HS, int kRows = kFlashTile>
__device__ void load_tile(bf* tile, int ld_tile, const bf16* src, size_t ld, int row0, int Tn) {
  constexpr int kChunks = HS / 8;  // 8 bf16 per 16 bytes
  for (int c = threadIdx.x; c < kRows * kChunks; c += kFlashThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < Tn) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * ld + col);
    *reinterpret_cast<uint4*>(tile + r * ld_tile + col) = v;
  }
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80+;
// .cg: cached in L2 only), zeros when !valid (src is then not read, but must be an address of
// the buffer). Completes at the wait_group that covers its commit group.
__device__ inline void cp_async_16(void* dst, const void* src, bool valid) {
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(src),
               "r"(valid ? 16 : 0));
}
// The same for 4 bytes (.ca: the only form below 16 bytes).
__device__ inline void cp_async_4(void* dst, const void* src, bool valid) {
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(at), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most `pending` of this thread's commit groups are still in flight (the other
// threads' copies are visible after a __syncthreads that follows).
template <int pending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

// The 16-byte chunks of a kFlashTile-row tile of HS bf16 that each thread copies: a compile-time
// count (head sizes are multiples of 16, so every thread copies as many), so that the copy loop
// unrolls whole. With a trip count that depended on threadIdx.x, ptxas kept a remainder loop and
// ~18 instructions of 64-bit address arithmetic per chunk in the kernels' tile loops (sm_90, head
// size 64: the forward's code is 23% shorter without, the backward kernels' 19-31%).
template <int HS>
inline constexpr int kChunksPerThread = kFlashTile*(HS / 8) / kFlashThreads;

// load_tile through cp.async: queued, not done (a commit and a wait follow).
template <int HS>
__device__ void load_tile_async(bf* tile, int ld_tile, const bf16* src, size_t ld, int row0,
                                int Tn) {
  constexpr int kChunks = HS / 8;
  static_assert(kFlashTile * kChunks % kFlashThreads == 0, "every thread copies as many chunks");
  if constexpr (kFlashThreads % kChunks == 0 && kChunksPerThread<HS> <= 4) {
    // Head sizes 16, 32 and 64: each thread keeps one column, its chunks kPass rows apart (the
    // chunks c = threadIdx.x + i kFlashThreads of the loop below): one offset and one stride for
    // all of them, few registers live across the tile loops. Larger head sizes keep the loop:
    // unrolled, their copies took registers the kernels then spilled (dK/dV at 128: 232 bytes).
    constexpr int kPass = kFlashThreads / kChunks;  // rows a pass of the block covers
    const int r0 = static_cast<int>(threadIdx.x) / kChunks;
    const int col = (static_cast<int>(threadIdx.x) % kChunks) * 8;
    const size_t from = (row0 + r0) * ld + col, pass = kPass * ld;
    bf* const to = tile + r0 * ld_tile + col;
#pragma unroll
    for (int i = 0; i < kChunksPerThread<HS>; ++i) {
      const bool in = row0 + r0 + i * kPass < Tn;
      cp_async_16(to + i * kPass * ld_tile, in ? src + from + i * pass : src, in);
    }
  } else {
    for (int c = threadIdx.x; c < kFlashTile * kChunks; c += kFlashThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8;
      const bool in = row0 + r < Tn;
      cp_async_16(tile + r * ld_tile + col, in ? src + (row0 + r) * ld + col : src, in);
    }
  }
}

// What every thread of a tile kernel's block knows: its (batch, head), its lane's place, where
// the head's rows start in the global buffers, and the shared-memory views (flash_smem()).
struct Block {
  int C = 0;       // H * hs
  size_t ld = 0;   // 3C, the qkv / dqkv row stride
  size_t qkv = 0;  // qkv / dqkv offset of this (batch, head)'s Q row 0 (K at +C, V at +2C)
  size_t out = 0;  // out / dout offset of its row 0 (row stride C)
  int warp = 0, r = 0, half = 0;  // the lane's warp, its row of the warp's 16, its half of that
  bf *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;  // tiles
  float *lse = nullptr, *d = nullptr;  // per query row of the tile (backward)
};
template <int HS>
__device__ Block block_of(unsigned char* smem, const FlashSmem& L, int H, int Tn) {
  Block x;
  const int b = blockIdx.x / H, h = blockIdx.x % H;
  x.C = H * HS;
  x.ld = 3 * static_cast<size_t>(x.C);
  x.qkv = static_cast<size_t>(b) * Tn * x.ld + h * HS;
  x.out = static_cast<size_t>(b) * Tn * x.C + h * HS;
  x.warp = threadIdx.x / 32;
  x.r = (threadIdx.x % 32) >> 1;
  x.half = threadIdx.x & 1;
  x.q = reinterpret_cast<bf*>(smem + L.q);
  x.k = reinterpret_cast<bf*>(smem + L.k);
  x.v = reinterpret_cast<bf*>(smem + L.v);
  x.dout = reinterpret_cast<bf*>(smem + L.dout);
  x.lse = reinterpret_cast<float*>(smem + L.lse);
  x.d = reinterpret_cast<float*>(smem + L.d);
  return x;
}

// The block's shared-memory views in stage s (0 or 1) of the two (flash_smem()).
__device__ inline Block staged(Block x, const FlashSmem& L, int s) {
  const size_t shift = s * L.stage;
  auto move = [shift](auto* p) {
    return reinterpret_cast<decltype(p)>(reinterpret_cast<unsigned char*>(p) + shift);
  };
  x.q = move(x.q);
  x.k = move(x.k);
  x.v = move(x.v);
  x.dout = move(x.dout);
  x.lse = move(x.lse);
  x.d = move(x.d);
  return x;
}

// K and V tile kt of the head into shared memory, asynchronously (a commit and a wait follow).
template <int HS>
__device__ void load_keys_async(const Block& x, const FlashSmem& L, const bf16* qkv, int kt,
                                int Tn) {
  load_tile_async<HS>(x.k, L.ld_tile, qkv + x.qkv + x.C, x.ld, kt * kFlashTile, Tn);
  load_tile_async<HS>(x.v, L.ld_tile, qkv + x.qkv + 2 * x.C, x.ld, kt * kFlashTile, Tn);
}

// One step of a two-stage walk over tiles: when there is a next tile, `load` queues its copy
// into the other stage (freed by the previous step's closing __syncthreads); then waits until
// the current tile has landed and every thread's part of it is visible.
template <typename Load>
__device__ void prefetch_next_and_wait(bool has_next, Load load) {
  if (has_next) {
    load();
    cp_async_commit();
    cp_async_wait<1>();  // only the next tile may still be in flight
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}

// ---- Forward -----------------------------------------------------------------------------
//
// mma.sync m16n8k16 (bf16 in, float accumulate) with the scores, the probabilities and the
// output accumulator in registers: nothing but the K and V tiles goes through shared memory
// per key tile (the wmma kernel stored S, reloaded it for the softmax, and moved the O
// accumulator through shared memory every tile). Fragment layouts are the PTX ISA's for
// m16n8k16: lane = 4 g + t; A (16 x 16, row): {a0,a1} row g cols 2t,2t+1; {a2,a3} row g+8;
// {a4,a5} row g cols 2t+8,2t+9; {a6,a7} row g+8 -- as four 32-bit registers of two bf16 (the
// lower column in the low half). B (16 x 8, col): {b0,b1} rows 2t,2t+1 col g; {b2,b3} rows
// 2t+8,2t+9. C (16 x 8, float): c0,c1 row g cols 2t,2t+1; c2,c3 row g+8. A C fragment pair
// over 16 keys is, rounded to bf16, the A fragment of the next product (P V) as it stands.

__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent bf16 of shared memory (an even element offset) as one register.
__device__ inline uint32_t ld_pair(const bf* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
// Four 8 x 8 bf16 matrices of shared memory, transposed, one register each (ldmatrix .trans):
// lanes 8m..8m+7 give the addresses of matrix m's 8 rows (16 bytes each, 16-byte aligned), and
// lane 4g + t receives matrix m's elements [2t][g] and [2t+1][g] in register m -- for a row-major
// [k][n] matrix that is the B fragment register of m16n8k16.
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const bf* row_address) {
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
// The same without .trans: lane 4g + t receives matrix m's elements [g][2t] and [g][2t+1] in
// register m -- for a row-major [n][k] matrix (rows of keys, columns of the head) that is the
// B fragment register of m16n8k16.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const bf* row_address) {
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The warp's 16 rows of a shared-memory tile (row pitch ld) as A fragments over HS columns.
template <int HS>
__device__ void load_a_rows(uint32_t (&a)[HS / 16][4], const bf* rows, int ld) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) {
    a[kk][0] = ld_pair(rows + g * ld + kk * 16 + 2 * t);
    a[kk][1] = ld_pair(rows + (g + 8) * ld + kk * 16 + 2 * t);
    a[kk][2] = ld_pair(rows + g * ld + kk * 16 + 8 + 2 * t);
    a[kk][3] = ld_pair(rows + (g + 8) * ld + kk * 16 + 8 + 2 * t);
  }
}

// c[m][kN columns] = A_m[16, HS] * Bm[kN rows, HS]^T for the warp's M row fragments m (the
// forward's and the dQ kernel's 16 M queries, the dK/dV kernel's 16 M keys): kN / 8 C fragments
// each; Bm kN rows of a tile (pitch ld), kN a multiple of 16. One ldmatrix.x4 gives the B
// fragments of two output column groups (n, n + 1) for one 16-wide step kk, and serves M
// products: matrices 0, 1 = rows [n*8, +8) x columns [kk*16, +8) and [kk*16 + 8, +8) (b0, b1 of
// group n), 2, 3 = the same for rows [n*8 + 8, +8) (group n + 1); lane l gives the address of
// row l % 8 of matrix l / 8. Each C fragment sums over kk in order, whatever M.
template <int HS, int M, int kN = kFlashTile>
__device__ void rows_times_tile_t(float (&c)[M][kN / 8][4], const uint32_t (&a)[M][HS / 16][4],
                                  const bf* Bm, int ld) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const bf* rows = Bm + ((lane & 7) + ((lane >> 4) & 1) * 8) * ld + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) c[m][n][0] = c[m][n][1] = c[m][n][2] = c[m][n][3] = 0.0f;
  }
#pragma unroll
  for (int n = 0; n < kN / 8; n += 2) {
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, rows + n * 8 * ld + kk * 16);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mma_16816(c[m][n], a[m][kk], b[0], b[1]);
        mma_16816(c[m][n + 1], a[m][kk], b[2], b[3]);
      }
    }
  }
}

// acc[m][16, HS] += X_m[16, kK] * Bm[kK rows, HS] for the warp's M row fragments m, X_m given as
// C fragments (rounded to bf16 here: the A operand), Bm kK rows of a tile (pitch ld); kK a
// multiple of 16. Each B fragment pair loaded serves M products; each accumulator takes the kK
// rows 16 at a time, in order, whatever M.
template <int HS, int M, int kK = kFlashTile>
__device__ void fragments_times_tile(float (&acc)[M][HS / 8][4], const float (&x)[M][kK / 8][4],
                                     const bf* Bm, int ld) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[M][4];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      a[m][0] = pack_bf16(x[m][2 * kk][0], x[m][2 * kk][1]);
      a[m][1] = pack_bf16(x[m][2 * kk][2], x[m][2 * kk][3]);
      a[m][2] = pack_bf16(x[m][2 * kk + 1][0], x[m][2 * kk + 1][1]);
      a[m][3] = pack_bf16(x[m][2 * kk + 1][2], x[m][2 * kk + 1][3]);
    }
    // Matrices (rows k, columns n): 0 = [kk*16, +8) x [n*8, +8), 1 = the next 8 rows, 2 and 3
    // the same for columns n*8 + 8: B fragments of output columns n and n + 1.
    const bf* b0 = Bm + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + (lane >> 4) * 8;
#pragma unroll
    for (int n = 0; n < HS / 8; n += 2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, b0 + n * 8);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mma_16816(acc[m][n], a[m], b[0], b[1]);
        mma_16816(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// The lane's two rows (g, g + 8 of the warp's 16, from row0) of acc * scale into dst (row
// stride ld_dst, head columns at dst), rows past Tn skipped.
template <int HS>
__device__ void write_fragment_rows(bf16* dst, size_t ld_dst, int row0, int Tn,
                                    const float (&acc)[HS / 8][4], float scale) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + g + 8 * r;
    if (row >= Tn) continue;
    bf16* d = dst + static_cast<size_t>(row) * ld_dst + 2 * t;
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      *reinterpret_cast<uint32_t*>(d + n * 8) =
          pack_bf16(acc[n][2 * r] * scale, acc[n][2 * r + 1] * scale);
    }
  }
}

// The forward's raw scores of the lane's two rows over key tile j0, -inf where masked, and their
// tile maximum (flash_forward_prob scales them in its fused multiply-add). Only the diagonal
// tile is masked (kMasked): every key of an earlier tile is visible to every row of the block,
// so the other tiles skip the compare and select per element.
template <bool kMasked>
__device__ inline void mask_scores(float (&s)[kFlashTile / 8][4], float (&tile_max)[2], int j0,
                                   const int (&row)[2], int t) {
#pragma unroll
  for (int n = 0; n < kFlashTile / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1, j = j0 + n * 8 + 2 * t + (e & 1);
      if (kMasked && j > row[r]) s[n][e] = -INFINITY;
      tile_max[r] = fmaxf(tile_max[r], s[n][e]);
    }
  }
}

template <int HS>
__global__ void __launch_bounds__(kFlashThreads, 2)
    flash_forward_kernel(bf16* out, float* lse, const bf16* qkv, int H, int Tn, float scale_log2,
                         FlashSmem L) {
  constexpr int M = flash_forward_fragments(HS);  // row fragments a warp
  constexpr int kRows = flash_forward_rows(HS);   // query rows a block
  extern __shared__ __align__(128) unsigned char smem[];
  const Block x = block_of<HS>(smem, L, H, Tn);
  const int qb = static_cast<int>(gridDim.y - 1 - blockIdx.y);  // the longest rows first
  const int q0 = qb * kRows;
  const int warp_row = q0 + x.warp * 16 * M;  // the warp's first row
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane >> 2, t = lane & 3;
  const int ld = L.ld_tile;
  int row[M][2];  // the lane's two rows in each of the warp's fragments
#pragma unroll
  for (int m = 0; m < M; ++m) {
    row[m][0] = warp_row + m * 16 + g;
    row[m][1] = row[m][0] + 8;
  }
  // Key tiles up to the block's last row that exists.
  const int nk = (min(q0 + kRows, Tn) - 1) / kFlashTile + 1;

  load_keys_async<HS>(x, L, qkv, 0, Tn);  // key tile 0 into stage 0, while Q loads
  cp_async_commit();
  load_tile<HS, kRows>(x.q, ld, qkv + x.qkv, x.ld, q0, Tn);
  __syncthreads();
  uint32_t qa[M][HS / 16][4];  // the warp's Q rows, for every key tile
#pragma unroll
  for (int m = 0; m < M; ++m) load_a_rows<HS>(qa[m], x.q + (x.warp * 16 * M + m * 16) * ld, ld);
  float o[M][HS / 8][4];
  float mx[M][2], l[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) o[m][n][0] = o[m][n][1] = o[m][n][2] = o[m][n][3] = 0.0f;
    mx[m][0] = mx[m][1] = -INFINITY;
    l[m][0] = l[m][1] = 0.0f;
  }

  for (int kt = 0; kt < nk; ++kt) {
    // Key tile kt + 1 goes into the other stage while this one is used.
    prefetch_next_and_wait(kt + 1 < nk, [&] {
      load_keys_async<HS>(staged(x, L, (kt + 1) & 1), L, qkv, kt + 1, Tn);
    });
    const Block c = staged(x, L, kt & 1);
    float s[M][kFlashTile / 8][4];  // S = Q K^T over the tile's 64 keys, per row fragment
    rows_times_tile_t<HS, M>(s, qa, c.k, ld);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      // Online softmax of the lane's two rows of fragment m; a row's 64 keys are spread over its
      // quad (t). Masked only where a key of the tile may lie past a row of the fragment (the
      // same for the whole warp).
      float tile_max[2] = {-INFINITY, -INFINITY};
      if (kt * kFlashTile + kFlashTile - 1 > warp_row + m * 16) {
        mask_scores<true>(s[m], tile_max, kt * kFlashTile, row[m], t);
      } else {
        mask_scores<false>(s[m], tile_max, kt * kFlashTile, row[m], t);
      }
      float alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        alpha[r] = flash_rescale(&mx[m][r], tile_max[r] * scale_log2);
      }
#pragma unroll
      for (int n = 0; n < kFlashTile / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[m][n][e] = flash_forward_prob(s[m][n][e], scale_log2, mx[m][e >> 1]);
          sum[e >> 1] += s[m][n][e];
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
        l[m][r] = l[m][r] * alpha[r] + sum[r];
      }
#pragma unroll
      for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[m][n][e] *= alpha[e >> 1];
      }
    }
    fragments_times_tile<HS, M>(o, s, c.v, ld);  // O += P V, P rounded to bf16
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
  // Every lane of a quad holds its rows' m and l.
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float inv = 1.0f / l[m][r];
#pragma unroll
      for (int n = 0; n < HS / 8; ++n) {
        o[m][n][2 * r] *= inv;
        o[m][n][2 * r + 1] *= inv;
      }
      if (t == 0 && row[m][r] < Tn) {
        lse[static_cast<size_t>(blockIdx.x) * Tn + row[m][r]] = mx[m][r] + log2f(l[m][r]);
      }
    }
    write_fragment_rows<HS>(out + x.out, x.C, warp_row + m * 16, Tn, o[m], 1.0f);
  }
}

// ---- Backward ----------------------------------------------------------------------------

// Blocks an SM the backward kernels are compiled for: 3 (168 registers a thread) up to head
// size 64, where their fragments fit in that; above, as many registers as they need (fewer
// blocks, no spills).
template <int HS>
constexpr int kFlashBackwardMinBlocks = HS <= 64 ? 3 : 1;

// D[row] = sum_c dO[row, c] O[row, c] over the head's hs columns; one warp per row of [B,H,Tn].
__global__ void __launch_bounds__(kFlashRowsPerBlock * 32)
    flash_rowsum_kernel(float* D, const bf16* dout, const bf16* out, int H, int Tn, int hs,
                        size_t rows) {
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlashRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps only: the reduction below is per warp
  const size_t bh = row / Tn, i = row % Tn, b = bh / H, h = bh % H;
  const size_t at = (b * Tn + i) * static_cast<size_t>(H) * hs + h * hs;
  float sum = 0.0f;
  for (int c = threadIdx.x % 32; c < hs; c += 32) sum += load(dout[at + c]) * load(out[at + c]);
  sum = warp_reduce(sum, SumOp{});
  if (threadIdx.x % 32 == 0) D[row] = sum;
}

// Q, dO tile qt and its rows' lse and D into shared memory (rows past Tn: zeros).
template <int HS>
__device__ void load_queries(const Block& x, const FlashSmem& L, const bf16* qkv, const bf16* dout,
                             const float* lse, const float* D, int qt, int Tn) {
  const int q0 = qt * kFlashTile;
  load_tile<HS>(x.q, L.ld_tile, qkv + x.qkv, x.ld, q0, Tn);
  load_tile<HS>(x.dout, L.ld_tile, dout + x.out, x.C, q0, Tn);
  const size_t base = static_cast<size_t>(blockIdx.x) * Tn;
  for (int t = threadIdx.x; t < kFlashTile; t += kFlashThreads) {
    const bool in = q0 + t < Tn;
    x.lse[t] = in ? lse[base + q0 + t] : 0.0f;
    x.d[t] = in ? D[base + q0 + t] : 0.0f;
  }
}

// load_queries through cp.async: queued, not done (a commit and a wait follow).
template <int HS>
__device__ void load_queries_async(const Block& x, const FlashSmem& L, const bf16* qkv,
                                   const bf16* dout, const float* lse, const float* D, int qt,
                                   int Tn) {
  const int q0 = qt * kFlashTile;
  load_tile_async<HS>(x.q, L.ld_tile, qkv + x.qkv, x.ld, q0, Tn);
  load_tile_async<HS>(x.dout, L.ld_tile, dout + x.out, x.C, q0, Tn);
  const size_t base = static_cast<size_t>(blockIdx.x) * Tn;
  for (int t = threadIdx.x; t < kFlashTile; t += kFlashThreads) {
    const bool in = q0 + t < Tn;
    cp_async_4(x.lse + t, in ? lse + base + q0 + t : lse, in);
    cp_async_4(x.d + t, in ? D + base + q0 + t : D, in);
  }
}

// P^T and dS^T of the lane's two keys against the kCols queries of query tile q0 from its
// column col0 on (the stage c holds the tile's lse and D). kMasked: some key of the warp lies
// after some query of the tile, or the tile has rows past Tn (flash_tile_work); otherwise every
// key of the warp sees every query of the tile.
template <bool kMasked, int kCols>
__device__ inline void transposed_probabilities(float (&st)[kCols / 8][4],
                                                float (&dpt)[kCols / 8][4], const Block& c,
                                                float scale_log2, int q0, int col0,
                                                const int (&key)[2], int t, int Tn) {
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = col0 + n * 8 + 2 * t + (e & 1), i = q0 + col;  // the query
      const float p =
          flash_prob(st[n][e], scale_log2, c.lse[col], !kMasked || (key[e >> 1] <= i && i < Tn));
      st[n][e] = p;
      dpt[n][e] = flash_dscore(p, dpt[n][e], c.d[col]);
    }
  }
}

// Blocks an SM the backward kernels are compiled for: kFlashBackwardMinBlocks with one row
// fragment a warp; 2 with two (two fragments' accumulators take 64-128 registers a thread).
template <int HS, int M>
constexpr int kFlashBackwardBlocks = M == 1 ? kFlashBackwardMinBlocks<HS> : 2;

// dK, dV of a block's flash_backward_rows(M) keys, M key fragments (16 M keys) a warp: over the
// query tiles from the block's first key tile on, in the transposed view (the warp's key rows
// against kCols of the tile's queries at a time): S^T = K_w Q^T, dP^T = V_w dO^T, P^T, dS^T, then
// dV += P^T dO and dK += dS^T Q, all in registers. Key tile s of the block sits in stage s's K
// and V regions (the query tiles walk through the Q, dO, lse and D regions of both stages). Each
// key's products are those of M = 1, in the same order: M changes no bit of the result.
template <int HS, int M>
__global__ void __launch_bounds__(kFlashThreads, kFlashBackwardBlocks<HS, M>)
    flash_backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                              const float* D, int H, int Tn, float scale, float scale_log2,
                              FlashSmem L) {
  static_assert(M == 1 || M == 2, "the block's keys fill at most the two stages' K, V regions");
  constexpr int kCols = flash_dkv_columns(M);
  extern __shared__ __align__(128) unsigned char smem[];
  const Block x = block_of<HS>(smem, L, H, Tn);
  const int kt0 = static_cast<int>(blockIdx.y) * M;  // the block's first key tile: kt0 = 0
                                                     // walks the most query tiles: first
  const int local = x.warp * 16 * M;                 // the warp's first key in the block
  const int key0 = kt0 * kFlashTile + local;
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane >> 2, t = lane & 3;
  const int ld = L.ld_tile;
  int key[M][2];  // the lane's two keys in each of the warp's fragments
#pragma unroll
  for (int m = 0; m < M; ++m) {
    key[m][0] = key0 + m * 16 + g;
    key[m][1] = key[m][0] + 8;
  }

  const int nq = flash_tiles(Tn);
  load_queries_async<HS>(staged(x, L, kt0 & 1), L, qkv, dout, lse, D, kt0, Tn);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < M; ++s) load_keys_async<HS>(staged(x, L, s), L, qkv, kt0 + s, Tn);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const Block keys = staged(x, L, local / kFlashTile);
  const int krow = local % kFlashTile;
  uint32_t ka[M][HS / 16][4], va[M][HS / 16][4];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    load_a_rows<HS>(ka[m], keys.k + (krow + m * 16) * ld, ld);
    load_a_rows<HS>(va[m], keys.v + (krow + m * 16) * ld, ld);
  }
  float dk[M][HS / 8][4], dv[M][HS / 8][4];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[m][n][e] = dv[m][n][e] = 0.0f;
    }
  }
  for (int qt = kt0; qt < nq; ++qt) {
    // Query tile qt + 1 goes into the other stage while this one is used.
    prefetch_next_and_wait(qt + 1 < nq, [&] {
      load_queries_async<HS>(staged(x, L, (qt + 1) & 1), L, qkv, dout, lse, D, qt + 1, Tn);
    });
    const Block c = staged(x, L, qt & 1);
    const int q0 = qt * kFlashTile;
    const FlashTileWork work =  // per warp
        flash_tile_work(key0, key0 + 16 * M - 1, q0, q0 + kFlashTile - 1, Tn);
    if (work != FlashTileWork::kSkip) {
      // The tile's queries kCols at a time: only that many score fragments live at once.
#pragma unroll
      for (int h = 0; h < kFlashTile / kCols; ++h) {
        const int col0 = h * kCols;
        float st[M][kCols / 8][4], dpt[M][kCols / 8][4];
        rows_times_tile_t<HS, M, kCols>(st, ka, c.q + col0 * ld, ld);
        rows_times_tile_t<HS, M, kCols>(dpt, va, c.dout + col0 * ld, ld);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          if (work == FlashTileWork::kMasked) {
            transposed_probabilities<true, kCols>(st[m], dpt[m], c, scale_log2, qt * kFlashTile,
                                                  col0, key[m], t, Tn);
          } else {
            transposed_probabilities<false, kCols>(st[m], dpt[m], c, scale_log2, qt * kFlashTile,
                                                   col0, key[m], t, Tn);
          }
        }
        fragments_times_tile<HS, M, kCols>(dv, st, c.dout + col0 * ld, ld);
        fragments_times_tile<HS, M, kCols>(dk, dpt, c.q + col0 * ld, ld);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    write_fragment_rows<HS>(dqkv + x.qkv + x.C, x.ld, key0 + m * 16, Tn, dk[m], scale);
    write_fragment_rows<HS>(dqkv + x.qkv + 2 * x.C, x.ld, key0 + m * 16, Tn, dv[m], 1.0f);
  }
}

// dS of the lane's two queries against kCols keys from key j0, in place of S. kMasked: some key
// lies after some query of the warp, or a query row is past Tn (flash_tile_work); otherwise
// every key sees every query.
template <bool kMasked, int kCols>
__device__ inline void score_gradients(float (&s)[kCols / 8][4], const float (&dp)[kCols / 8][4],
                                       float scale_log2, const float (&lse_r)[2],
                                       const float (&d_r)[2], int j0, const int (&query)[2], int t,
                                       int Tn) {
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1, j = j0 + n * 8 + 2 * t + (e & 1);  // the key
      const int i = query[r];
      const float p = flash_prob(s[n][e], scale_log2, lse_r[r], !kMasked || (j <= i && i < Tn));
      s[n][e] = flash_dscore(p, dp[n][e], d_r[r]);
    }
  }
}

// dQ of a block's flash_backward_rows(M) queries, M query fragments (16 M queries) a warp: over
// the key tiles up to the block's last query tile, kCols keys at a time: S = Q_w K^T,
// dP = dO_w V^T, dS, dQ += dS K. Query tile s of the block sits in stage s's Q, dO, lse and D
// regions (the key tiles walk through the K and V regions of both stages). Each query's products
// are those of M = 1, in the same order: M changes no bit of the result.
template <int HS, int M>
__global__ void __launch_bounds__(kFlashThreads, kFlashBackwardBlocks<HS, M>)
    flash_backward_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                             const float* D, int H, int Tn, float scale, float scale_log2,
                             FlashSmem L) {
  static_assert(M == 1 || M == 2, "the block's queries fill at most the two stages' regions");
  constexpr int kCols = flash_dq_columns(M);
  extern __shared__ __align__(128) unsigned char smem[];
  const Block x = block_of<HS>(smem, L, H, Tn);
  // The block's first query tile; the longest rows first.
  const int qt0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * M;
  const int local = x.warp * 16 * M;  // the warp's first query in the block
  const int query0 = qt0 * kFlashTile + local;
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane >> 2, t = lane & 3;
  const int ld = L.ld_tile;
  int query[M][2];  // the lane's two queries in each of the warp's fragments
#pragma unroll
  for (int m = 0; m < M; ++m) {
    query[m][0] = query0 + m * 16 + g;
    query[m][1] = query[m][0] + 8;
  }
  // Key tiles up to the block's last query tile that has rows (with one tile a block, that is
  // it: written so, the compiler keeps M = 1 at 168 registers without spills).
  const int nk = M == 1 ? qt0 + 1 : min(qt0 + M, flash_tiles(Tn));

  load_keys_async<HS>(x, L, qkv, 0, Tn);  // key tile 0 into stage 0, while the queries load
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < M; ++s) load_queries<HS>(staged(x, L, s), L, qkv, dout, lse, D, qt0 + s, Tn);
  __syncthreads();
  const Block qs = staged(x, L, local / kFlashTile);
  const int qrow = local % kFlashTile;
  uint32_t qa[M][HS / 16][4], da[M][HS / 16][4];
  float lse_r[M][2], d_r[M][2];
  float dq[M][HS / 8][4];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    load_a_rows<HS>(qa[m], qs.q + (qrow + m * 16) * ld, ld);
    load_a_rows<HS>(da[m], qs.dout + (qrow + m * 16) * ld, ld);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      lse_r[m][r] = qs.lse[qrow + m * 16 + g + 8 * r];
      d_r[m][r] = qs.d[qrow + m * 16 + g + 8 * r];
    }
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) dq[m][n][0] = dq[m][n][1] = dq[m][n][2] = dq[m][n][3] = 0.0f;
  }
  for (int kt = 0; kt < nk; ++kt) {
    prefetch_next_and_wait(
        kt + 1 < nk, [&] { load_keys_async<HS>(staged(x, L, (kt + 1) & 1), L, qkv, kt + 1, Tn); });
    const Block c = staged(x, L, kt & 1);
    const int k0 = kt * kFlashTile;
    const FlashTileWork work =  // per warp
        flash_tile_work(k0, k0 + kFlashTile - 1, query0, query0 + 16 * M - 1, Tn);
    if (work != FlashTileWork::kSkip) {
#pragma unroll
      for (int h = 0; h < kFlashTile / kCols; ++h) {
        const int col0 = h * kCols;  // the tile's keys col0 .. col0 + kCols - 1
        float s[M][kCols / 8][4], dp[M][kCols / 8][4];
        rows_times_tile_t<HS, M, kCols>(s, qa, c.k + col0 * ld, ld);
        rows_times_tile_t<HS, M, kCols>(dp, da, c.v + col0 * ld, ld);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          if (work == FlashTileWork::kMasked) {
            score_gradients<true, kCols>(s[m], dp[m], scale_log2, lse_r[m], d_r[m], k0 + col0,
                                         query[m], t, Tn);
          } else {
            score_gradients<false, kCols>(s[m], dp[m], scale_log2, lse_r[m], d_r[m], k0 + col0,
                                          query[m], t, Tn);
          }
        }
        fragments_times_tile<HS, M, kCols>(dq, s, c.k + col0 * ld, ld);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    write_fragment_rows<HS>(dqkv + x.qkv, x.ld, query0 + m * 16, Tn, dq[m], scale);
  }
}

// ---- Host side ---------------------------------------------------------------------------

void check_args(const char* fn, int B, int Tn, int C, int H,
                std::initializer_list<const void*> pointers) {
  if (B < 0 || Tn < 0 || !flash_attention_supported(true, C, H)) {
    throw std::invalid_argument(
        std::string("rm::cuda::") + fn + ": unsupported shape B=" + std::to_string(B) +
        " T=" + std::to_string(Tn) + " C=" + std::to_string(C) + " H=" + std::to_string(H));
  }
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
      throw std::invalid_argument(std::string("rm::cuda::") + fn +
                                  ": buffers must be 16-byte aligned");
    }
  }
}

template <typename Kernel, typename... Args>
void launch(Kernel kernel, FlashGrid g, size_t smem, cudaStream_t stream, Args... args) {
  if (g.x == 0) return;
  RM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)),
                kThrow);
  kernel<<<dim3(g.x, g.y), kFlashThreads, smem, stream>>>(args...);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
}

// Calls f.template operator()<HS>() for the runtime head size (a supported one).
template <typename F>
void with_head_size(int hs, F&& f) {
  switch (hs) {
    case 16:
      return f.template operator()<16>();
    case 32:
      return f.template operator()<32>();
    case 48:
      return f.template operator()<48>();
    case 64:
      return f.template operator()<64>();
    case 80:
      return f.template operator()<80>();
    case 96:
      return f.template operator()<96>();
    case 112:
      return f.template operator()<112>();
    case 128:
      return f.template operator()<128>();
    default:
      throw std::invalid_argument("rm::cuda flash attention: head size " + std::to_string(hs));
  }
}

struct ForwardLaunch {
  bf16* out;
  float* lse;
  const bf16* qkv;
  int B, Tn, H, hs;
  cudaStream_t stream;
  template <int HS>
  void operator()() const {
    const FlashSmem L = flash_smem(HS, false);
    launch(flash_forward_kernel<HS>, flash_grid(B, Tn, H, flash_forward_rows(HS)), L.bytes, stream,
           out, lse, qkv, H, Tn, flash_scale_log2(HS), L);
  }
};

// Launches kernel<1> or, where the head size takes it, kernel<2> (M row fragments a warp) over
// blocks of flash_backward_rows(M) rows.
template <typename Kernel1, typename Kernel2, typename... Args>
void launch_fragments(int fragments, Kernel1 kernel1, Kernel2 kernel2, int B, int Tn, int H,
                      size_t smem, cudaStream_t stream, Args... args) {
  const FlashGrid g = flash_grid(B, Tn, H, flash_backward_rows(fragments));
  if (fragments == 2) {
    launch(kernel2, g, smem, stream, args...);
  } else {
    launch(kernel1, g, smem, stream, args...);
  }
}

struct BackwardLaunch {
  bf16* dqkv;
  const bf16* dout;
  const bf16* qkv;
  const float* lse;
  const float* D;
  int B, Tn, H;
  FlashBackwardFragments fragments;
  cudaStream_t stream;
  template <int HS>
  void operator()() const {
    const FlashSmem L = flash_smem(HS, true);
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
    constexpr int M2 = flash_backward_max_fragments(HS);  // 2 where the head size takes it
    launch_fragments(fragments.dkv, flash_backward_dkv_kernel<HS, 1>,
                     flash_backward_dkv_kernel<HS, M2>, B, Tn, H, L.bytes, stream, dqkv, dout, qkv,
                     lse, D, H, Tn, scale, flash_scale_log2(HS), L);
    launch_fragments(fragments.dq, flash_backward_dq_kernel<HS, 1>,
                     flash_backward_dq_kernel<HS, M2>, B, Tn, H, L.bytes, stream, dqkv, dout, qkv,
                     lse, D, H, Tn, scale, flash_scale_log2(HS), L);
  }
};

// The fragments a call asked for (0: the environment's, read once, clamped to the head size's
// most), checked.
FlashBackwardFragments resolve(FlashBackwardFragments f, int hs) {
  static const int dkv = gpu_switch_value(kFlashDkvFragmentsSwitch);
  static const int dq = gpu_switch_value(kFlashDqFragmentsSwitch);
  const int most = flash_backward_max_fragments(hs);
  if (f.dkv == 0) f.dkv = std::min(dkv, most);
  if (f.dq == 0) f.dq = std::min(dq, most);
  for (int n : {f.dkv, f.dq}) {
    if (n < 1 || n > most) {
      throw std::invalid_argument("rm::cuda::flash_attention_backward: " + std::to_string(n) +
                                  " row fragments a warp at head size " + std::to_string(hs) +
                                  " (1 to " + std::to_string(most) + ")");
    }
  }
  return f;
}

}  // namespace

void flash_attention_forward(bf16* out, bf16* lse, const bf16* qkv, int B, int Tn, int C, int H,
                             cudaStream_t stream) {
  check_args("flash_attention_forward", B, Tn, C, H, {out, lse, qkv});
  with_head_size(C / H,
                 ForwardLaunch{out, reinterpret_cast<float*>(lse), qkv, B, Tn, H, C / H, stream});
}

void flash_attention_backward(bf16* dqkv, bf16* scratch, const bf16* dout, const bf16* qkv,
                              const bf16* lse, const bf16* out, int B, int Tn, int C, int H,
                              cudaStream_t stream, FlashBackwardFragments fragments) {
  check_args("flash_attention_backward", B, Tn, C, H, {dqkv, scratch, dout, qkv, lse, out});
  fragments = resolve(fragments, C / H);
  const size_t rows = static_cast<size_t>(B) * H * Tn;
  if (rows == 0) return;
  float* D = reinterpret_cast<float*>(scratch);
  flash_rowsum_kernel<<<flash_rowsum_blocks(rows), kFlashRowsPerBlock * 32, 0, stream>>>(
      D, dout, out, H, Tn, C / H, rows);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
  with_head_size(C / H, BackwardLaunch{dqkv, dout, qkv, reinterpret_cast<const float*>(lse), D, B,
                                       Tn, H, fragments, stream});
}

}  // namespace rm::cuda

#include "kernels/cuda/flash_attention.h"

#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_util.cuh"

namespace rm::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using bf = __nv_bfloat16;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// ---- Warp-level tile products (every lane of the warp calls them) ---------------------------

// S[16, kFlashTile] = A[16, HS] * Bm[kFlashTile, HS]^T, stored as float (row-major, ld_s).
// A: the warp's 16 rows of a tile (Q or dO or K or V rows), Bm: a whole tile.
template <int HS>
__device__ void rows_times_tile_t(float* S, int ld_s, const bf* A, int ld_a, const bf* Bm,
                                  int ld_b) {
  FragA a[HS / 16];
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) wmma::load_matrix_sync(a[kk], A + kk * 16, ld_a);
#pragma unroll
  for (int n = 0; n < kFlashTile / 16; ++n) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk) {
      // B(k, c) = Bm[16n + c][16kk + k]: column-major with ldm ld_b.
      FragBCol b;
      wmma::load_matrix_sync(b, Bm + n * 16 * ld_b + kk * 16, ld_b);
      wmma::mma_sync(acc, a[kk], b, acc);
    }
    wmma::store_matrix_sync(S + n * 16, acc, ld_s, wmma::mem_row_major);
  }
}

// acc[16, HS] += A[16, kFlashTile] * Bm[kFlashTile, HS] (A bf16 row-major ld_a, Bm a tile).
template <int HS>
__device__ void rows_times_tile(FragAcc (&acc)[HS / 16], const bf* A, int ld_a, const bf* Bm,
                                int ld_b) {
  FragA a[kFlashTile / 16];
#pragma unroll
  for (int kk = 0; kk < kFlashTile / 16; ++kk) wmma::load_matrix_sync(a[kk], A + kk * 16, ld_a);
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
#pragma unroll
    for (int kk = 0; kk < kFlashTile / 16; ++kk) {
      FragBRow b;
      wmma::load_matrix_sync(b, Bm + kk * 16 * ld_b + n * 16, ld_b);
      wmma::mma_sync(acc[n], a[kk], b, acc[n]);
    }
  }
}

// ---- Block-level copies ------------------------------------------------------------------

// tile[r, :] = src[(row0 + r) * ld, 0:HS] for the kFlashTile rows, zeros past Tn. 16-byte copies
// (src rows and the tile's pitch are multiples of 8 elements; the launcher checks alignment).
template <int HS>
__device__ void load_tile(bf* tile, int ld_tile, const bf16* src, size_t ld, int row0, int Tn) {
  constexpr int kChunks = HS / 8;  // 8 bf16 per 16 bytes
  for (int c = threadIdx.x; c < kFlashTile * kChunks; c += kFlashThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < Tn) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * ld + col);
    *reinterpret_cast<uint4*>(tile + r * ld_tile + col) = v;
  }
}

// A warp's 16 x HS float tile (row-major, ld) times `scale` into dst rows row0.. (ld_dst), rows
// past Tn skipped. Lane (r, half) writes half a row.
template <int HS>
__device__ void write_rows(bf16* dst, size_t ld_dst, int row0, int Tn, const float* tile, int ld,
                           float scale) {
  const int lane = threadIdx.x % 32, r = lane >> 1, c0 = (lane & 1) * (HS / 2);
  if (row0 + r >= Tn) return;
  bf16* d = dst + (row0 + r) * ld_dst + c0;
  const float* s = tile + r * ld + c0;
#pragma unroll
  for (int c = 0; c < HS / 2; ++c) d[c] = store<bf16>(s[c] * scale);
}

template <int HS>
__device__ void store_and_write_rows(bf16* dst, size_t ld_dst, int row0, int Tn,
                                     FragAcc (&acc)[HS / 16], float* buf, int ld, float scale) {
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
    wmma::store_matrix_sync(buf + n * 16, acc[n], ld, wmma::mem_row_major);
  }
  __syncwarp();
  write_rows<HS>(dst, ld_dst, row0, Tn, buf, ld, scale);
  __syncwarp();
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
  float *f0 = nullptr, *f1 = nullptr;  // the warp's float buffers
  bf *h0 = nullptr, *h1 = nullptr;     // the warp's bf16 buffers
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
  x.f0 = reinterpret_cast<float*>(smem + L.f0 + x.warp * L.f_bytes);
  x.f1 = reinterpret_cast<float*>(smem + L.f1 + x.warp * L.f_bytes);
  x.h0 = reinterpret_cast<bf*>(smem + L.h0 + x.warp * L.h_bytes);
  x.h1 = reinterpret_cast<bf*>(smem + L.h1 + x.warp * L.h_bytes);
  return x;
}

// K and V tile kt of the head into shared memory.
template <int HS>
__device__ void load_keys(const Block& x, const FlashSmem& L, const bf16* qkv, int kt, int Tn) {
  load_tile<HS>(x.k, L.ld_tile, qkv + x.qkv + x.C, x.ld, kt * kFlashTile, Tn);
  load_tile<HS>(x.v, L.ld_tile, qkv + x.qkv + 2 * x.C, x.ld, kt * kFlashTile, Tn);
}

// ---- Forward -----------------------------------------------------------------------------

template <int HS>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(bf16* out, float* lse, const bf16* qkv, int H, int Tn, float scale_log2,
                         FlashSmem L) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Block x = block_of<HS>(smem, L, H, Tn);
  const int qt = static_cast<int>(gridDim.y - 1 - blockIdx.y);  // the longest rows first
  const int q0 = qt * kFlashTile, row0 = q0 + x.warp * 16, i = row0 + x.r;  // the lane's query
  float* S = x.f0;
  float* O = x.f1;
  bf* P = x.h0;

  load_tile<HS>(x.q, L.ld_tile, qkv + x.qkv, x.ld, q0, Tn);
  for (int e = threadIdx.x % 32; e < 16 * HS; e += 32) O[(e / HS) * L.ld_f + e % HS] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // every warp is done with the previous K, V tiles (and Q is loaded)
    load_keys<HS>(x, L, qkv, kt, Tn);
    __syncthreads();
    rows_times_tile_t<HS>(S, L.ld_f, x.q + x.warp * 16 * L.ld_tile, L.ld_tile, x.k, L.ld_tile);
    __syncwarp();
    // Online softmax of row i over this tile's 64 keys, 32 per lane.
    const int j0 = kt * kFlashTile + x.half * 32;
    const float* srow = S + x.r * L.ld_f + x.half * 32;
    float s[32];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      s[c] = j0 + c <= i ? srow[c] * scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float alpha = flash_rescale(&m, tile_max);
    bf* prow = P + x.r * L.ld_h + x.half * 32;
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const float p = exp2f(s[c] - m);  // 0 where masked
      sum += p;
      prow[c] = __float2bfloat16_rn(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    float* orow = O + x.r * L.ld_f + x.half * (HS / 2);
#pragma unroll
    for (int c = 0; c < HS / 2; ++c) orow[c] *= alpha;
    __syncwarp();
    // O += P V, the accumulator through shared memory (its rows were just rescaled).
    FragAcc acc[HS / 16];
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      wmma::load_matrix_sync(acc[n], O + n * 16, L.ld_f, wmma::mem_row_major);
    }
    rows_times_tile<HS>(acc, P, L.ld_h, x.v, L.ld_tile);
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      wmma::store_matrix_sync(O + n * 16, acc[n], L.ld_f, wmma::mem_row_major);
    }
    __syncwarp();
  }
  // Both lanes of a row hold the same m and l.
  write_rows<HS>(out + x.out, x.C, row0, Tn, O, L.ld_f, 1.0f / l);
  if (x.half == 0 && i < Tn) lse[static_cast<size_t>(blockIdx.x) * Tn + i] = m + log2f(l);
}

// ---- Backward ----------------------------------------------------------------------------

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
__device__ void load_queries(const Block& x, const FlashSmem& L, const bf16* qkv,
                             const bf16* dout, const float* lse, const float* D, int qt,
                             int Tn) {
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

// dK, dV of 64 keys: over the query tiles kt..nq-1, in the transposed view (the warp's 16 key
// rows against the tile's 64 queries): S^T = K_w Q^T, dP^T = V_w dO^T, P^T, dS^T, then
// dV += P^T dO and dK += dS^T Q in registers.
template <int HS>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                              const float* D, int H, int Tn, float scale, float scale_log2,
                              FlashSmem L) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Block x = block_of<HS>(smem, L, H, Tn);
  const int kt = static_cast<int>(blockIdx.y);  // kt = 0 walks the most query tiles: first
  const int row0 = kt * kFlashTile + x.warp * 16, j = row0 + x.r;  // the lane's key
  float* St = x.f0;
  float* dPt = x.f1;
  bf* Pt = x.h0;
  bf* dSt = x.h1;

  load_keys<HS>(x, L, qkv, kt, Tn);
  FragAcc dk[HS / 16], dv[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }
  for (int qt = kt; qt < static_cast<int>(gridDim.y); ++qt) {
    __syncthreads();  // every warp is done with the previous query tile (and K, V are loaded)
    load_queries<HS>(x, L, qkv, dout, lse, D, qt, Tn);
    __syncthreads();
    rows_times_tile_t<HS>(St, L.ld_f, x.k + x.warp * 16 * L.ld_tile, L.ld_tile, x.q, L.ld_tile);
    rows_times_tile_t<HS>(dPt, L.ld_f, x.v + x.warp * 16 * L.ld_tile, L.ld_tile, x.dout,
                          L.ld_tile);
    __syncwarp();
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int t = x.half * 32 + c, i = qt * kFlashTile + t;  // the query
      const int e = x.r * L.ld_f + t;
      const float p = flash_prob(St[e], scale_log2, x.lse[t], j <= i && i < Tn);
      Pt[x.r * L.ld_h + t] = __float2bfloat16_rn(p);
      dSt[x.r * L.ld_h + t] = __float2bfloat16_rn(flash_dscore(p, dPt[e], x.d[t]));
    }
    __syncwarp();
    rows_times_tile<HS>(dv, Pt, L.ld_h, x.dout, L.ld_tile);
    rows_times_tile<HS>(dk, dSt, L.ld_h, x.q, L.ld_tile);
  }
  // St's buffer is free (its last readers were before the __syncwarp above).
  store_and_write_rows<HS>(dqkv + x.qkv + x.C, x.ld, row0, Tn, dk, St, L.ld_f, scale);
  store_and_write_rows<HS>(dqkv + x.qkv + 2 * x.C, x.ld, row0, Tn, dv, St, L.ld_f, 1.0f);
}

// dQ of 64 queries: over the key tiles 0..qt, S = Q_w K^T, dP = dO_w V^T, dS, dQ += dS K.
template <int HS>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                             const float* D, int H, int Tn, float scale, float scale_log2,
                             FlashSmem L) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Block x = block_of<HS>(smem, L, H, Tn);
  const int qt = static_cast<int>(gridDim.y - 1 - blockIdx.y);  // the longest rows first
  const int row0 = qt * kFlashTile + x.warp * 16, i = row0 + x.r;  // the lane's query
  float* S = x.f0;
  float* dP = x.f1;
  bf* dS = x.h0;

  load_queries<HS>(x, L, qkv, dout, lse, D, qt, Tn);
  FragAcc dq[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // every warp is done with the previous K, V tiles (queries loaded)
    load_keys<HS>(x, L, qkv, kt, Tn);
    __syncthreads();
    rows_times_tile_t<HS>(S, L.ld_f, x.q + x.warp * 16 * L.ld_tile, L.ld_tile, x.k, L.ld_tile);
    rows_times_tile_t<HS>(dP, L.ld_f, x.dout + x.warp * 16 * L.ld_tile, L.ld_tile, x.v,
                          L.ld_tile);
    __syncwarp();
    const float lse_i = x.lse[x.warp * 16 + x.r], d_i = x.d[x.warp * 16 + x.r];
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int t = x.half * 32 + c, jj = kt * kFlashTile + t;  // the key
      const int e = x.r * L.ld_f + t;
      const float p = flash_prob(S[e], scale_log2, lse_i, jj <= i && i < Tn);
      dS[x.r * L.ld_h + t] = __float2bfloat16_rn(flash_dscore(p, dP[e], d_i));
    }
    __syncwarp();
    rows_times_tile<HS>(dq, dS, L.ld_h, x.k, L.ld_tile);
  }
  store_and_write_rows<HS>(dqkv + x.qkv, x.ld, row0, Tn, dq, S, L.ld_f, scale);
}

// ---- Host side ---------------------------------------------------------------------------

void check_args(const char* fn, int B, int Tn, int C, int H,
                std::initializer_list<const void*> pointers) {
  if (B < 0 || Tn < 0 || !flash_attention_supported(true, C, H)) {
    throw std::invalid_argument(std::string("rm::cuda::") + fn + ": unsupported shape B=" +
                                std::to_string(B) + " T=" + std::to_string(Tn) +
                                " C=" + std::to_string(C) + " H=" + std::to_string(H));
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
    case 16: return f.template operator()<16>();
    case 32: return f.template operator()<32>();
    case 48: return f.template operator()<48>();
    case 64: return f.template operator()<64>();
    case 80: return f.template operator()<80>();
    case 96: return f.template operator()<96>();
    case 112: return f.template operator()<112>();
    case 128: return f.template operator()<128>();
    default: throw std::invalid_argument("rm::cuda flash attention: head size " +
                                         std::to_string(hs));
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
    launch(flash_forward_kernel<HS>, flash_grid(B, Tn, H), L.bytes, stream, out, lse, qkv, H, Tn,
           flash_scale_log2(HS), L);
  }
};

struct BackwardLaunch {
  bf16* dqkv;
  const bf16* dout;
  const bf16* qkv;
  const float* lse;
  const float* D;
  int B, Tn, H;
  cudaStream_t stream;
  template <int HS>
  void operator()() const {
    const FlashSmem L = flash_smem(HS, true);
    const FlashGrid g = flash_grid(B, Tn, H);
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
    launch(flash_backward_dkv_kernel<HS>, g, L.bytes, stream, dqkv, dout, qkv, lse, D, H, Tn,
           scale, flash_scale_log2(HS), L);
    launch(flash_backward_dq_kernel<HS>, g, L.bytes, stream, dqkv, dout, qkv, lse, D, H, Tn, scale,
           flash_scale_log2(HS), L);
  }
};

}  // namespace

void flash_attention_forward(bf16* out, bf16* lse, const bf16* qkv, int B, int Tn, int C, int H,
                             cudaStream_t stream) {
  check_args("flash_attention_forward", B, Tn, C, H, {out, lse, qkv});
  with_head_size(C / H, ForwardLaunch{out, reinterpret_cast<float*>(lse), qkv, B, Tn, H, C / H,
                                      stream});
}

void flash_attention_backward(bf16* dqkv, bf16* scratch, const bf16* dout, const bf16* qkv,
                              const bf16* lse, const bf16* out, int B, int Tn, int C, int H,
                              cudaStream_t stream) {
  check_args("flash_attention_backward", B, Tn, C, H, {dqkv, scratch, dout, qkv, lse, out});
  const size_t rows = static_cast<size_t>(B) * H * Tn;
  if (rows == 0) return;
  float* D = reinterpret_cast<float*>(scratch);
  flash_rowsum_kernel<<<flash_rowsum_blocks(rows), kFlashRowsPerBlock * 32, 0, stream>>>(
      D, dout, out, H, Tn, C / H, rows);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
  with_head_size(C / H, BackwardLaunch{dqkv, dout, qkv, reinterpret_cast<const float*>(lse), D, B,
                                       Tn, H, stream});
}

}  // namespace rm::cuda

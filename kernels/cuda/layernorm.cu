#include "kernels/cuda/layernorm.h"

#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/cuda/residual.h"
#include "kernels/row_math.h"

namespace rm::cuda {
namespace {

// Block per row; the CPU's two passes over centred data (row_math.h explains the shift).
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                             const T* bias, int C) {
  const size_t row = static_cast<size_t>(blockIdx.x) * C;
  const T* x = inp + row;
  T* o = out + row;
  const float shift = load(x[0]);
  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += load(x[c]) - shift;
  const float m = layernorm_mean(shift, block_sum(sum), C);
  float sq = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = load(x[c]) - m;
    sq += d * d;
  }
  const float s = layernorm_rstd(block_sum(sq), C);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    o[c] = store<T>(layernorm_normalise(load(x[c]), m, s, load(weight[c]), load(bias[c])));
  }
  if (threadIdx.x == 0) {
    if (mean != nullptr) mean[blockIdx.x] = m;
    if (rstd != nullptr) rstd[blockIdx.x] = s;
  }
}

// Warp per row: dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight * dout.
// A warp, not a block: a row of 768 is 24 elements a lane, and warp shuffles need no
// __syncthreads (the block-per-row kernel waited on four per row).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                          const float* rstd, int N, int C) {
  const size_t r = static_cast<size_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= static_cast<size_t>(N)) return;  // the whole warp: r is the same for its lanes
  const int lane = static_cast<int>(threadIdx.x % 32);
  const size_t row = r * C;
  const T* x = inp + row;
  const T* d = dout + row;
  T* dx = dinp + row;
  const float m = mean[r], s = rstd[r];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float g = load(weight[c]) * load(d[c]);
    g_sum += g;
    gx_sum += layernorm_gx_term(g, load(x[c]), m, s);
  }
  const float g_mean = warp_reduce(g_sum, SumOp{}) / C;
  const float gx_mean = warp_reduce(gx_sum, SumOp{}) / C;
  for (int c = lane; c < C; c += 32) {
    dx[c] = store<T>(load(dx[c]) + layernorm_dinp(load(x[c]), load(d[c]), load(weight[c]), m, s,
                                                  g_mean, gx_mean));
  }
}

// layernorm's weight and bias gradients' terms at (n, c): xhat * dout and dout.
template <typename T>
struct LayerNormParamTerms {
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  int C;
  __device__ void operator()(int n, int c, float (&t)[2]) const {
    const size_t i = static_cast<size_t>(n) * C + c;
    const float d = load(dout[i]);
    t[0] = layernorm_dweight_term(load(inp[i]), d, mean[n], rstd[n]);
    t[1] = d;
  }
};

// ---- Rows kept in registers: one warp per row, kVec 16-byte vectors a lane -------------------
// Lane l holds elements [(v * 32 + l) * E, +E) of the row for v < kVec (E = Vec16<T>::kElems),
// so each vector load of a warp reads 512 contiguous bytes. Every element is read from memory
// once; the general kernels above read a row two or three times with 2-byte loads.

template <typename T, int kVec>
__device__ inline void load_row(Vec16<T> (&r)[kVec], const T* row) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int v = 0; v < kVec; ++v) r[v] = load_vec16(row + (v * 32 + lane) * Vec16<T>::kElems);
}

// kResidual: the row is first made as sum = inp + other, rounded to T as add() rounds it, and
// written to `sum` (which may alias inp or other: each lane reads its elements before writing
// them); the layernorm then reads the rounded sum, so the bits are add's then this kernel's.
template <typename T, int kVec, bool kResidual>
__global__ void __launch_bounds__(kElementwiseThreads)
    layernorm_forward_rows_kernel(T* out, float* mean, float* rstd, const T* inp, const T* other,
                                  T* sum_out, const T* weight, const T* bias, int N, int C) {
  constexpr int E = Vec16<T>::kElems;
  const size_t r = static_cast<size_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= static_cast<size_t>(N)) return;  // the whole warp
  const int lane = static_cast<int>(threadIdx.x % 32);
  Vec16<T> x[kVec];
  load_row(x, inp + r * C);
  if constexpr (kResidual) {
    Vec16<T> y[kVec];
    load_row(y, other + r * C);
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
#pragma unroll
      for (int e = 0; e < E; ++e) x[v].v[e] = store<T>(load(x[v].v[e]) + load(y[v].v[e]));
      store_vec16(sum_out + r * C + (v * 32 + lane) * E, x[v]);
    }
  }
  // The CPU's two passes over centred data (row_math.h), the shift the row's first element.
  const float shift = __shfl_sync(0xffffffffu, load(x[0].v[0]), 0);
  float sum = 0.0f;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
#pragma unroll
    for (int e = 0; e < E; ++e) sum += load(x[v].v[e]) - shift;
  }
  const float m = layernorm_mean(shift, warp_reduce(sum, SumOp{}), C);
  float sq = 0.0f;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float d = load(x[v].v[e]) - m;
      sq += d * d;
    }
  }
  const float s = layernorm_rstd(warp_reduce(sq, SumOp{}), C);
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c0 = (v * 32 + lane) * E;
    const Vec16<T> w = load_vec16(weight + c0), b = load_vec16(bias + c0);
    Vec16<T> o;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      o.v[e] = store<T>(
          layernorm_normalise(load(x[v].v[e]), m, s, load(w.v[e]), load(b.v[e])));
    }
    store_vec16(out + r * C + c0, o);
  }
  if (lane == 0) {
    if (mean != nullptr) mean[r] = m;
    if (rstd != nullptr) rstd[r] = s;
  }
}

// The whole backward in one pass over the rows: each warp takes rows warp, warp + warps, ...
// (warps = gridDim.x * 8, a function of N: layernorm_backward_launch), adds each row's input
// gradient, and keeps its columns' weight and bias gradient sums in registers; at the end it
// writes them as its partial ([warp][2][C]), which launch_column_totals adds in warp order.
template <typename T, int kVec>
__global__ void __launch_bounds__(kElementwiseThreads)
    layernorm_backward_rows_kernel(T* dinp, float* partials, const T* dout, const T* inp,
                                   const T* weight, const float* mean, const float* rstd, int N,
                                   int C) {
  constexpr int E = Vec16<T>::kElems;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const size_t warp = static_cast<size_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * (blockDim.x / 32);
  Vec16<T> w[kVec];
  load_row(w, weight);
  float dw[kVec][E], db[kVec][E];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
#pragma unroll
    for (int e = 0; e < E; ++e) dw[v][e] = db[v][e] = 0.0f;
  }
  // A warp walks 16 rows at N = 16384, and walked them one at a time: each row's loads waited
  // on in turn, at 8 warps an SM (49 us a call at GPT-2's shape on an H200, 37% of its
  // bandwidth, ncu). So the next row's inp, dout, dinp and statistics are loaded before this
  // row's arithmetic, and their latency overlaps it.
  Vec16<T> x[kVec], d[kVec], o[kVec];
  float m = 0.0f, s = 0.0f;
  const auto fetch = [&](size_t row, Vec16<T>(&xr)[kVec], Vec16<T>(&dr)[kVec],
                         Vec16<T>(&orow)[kVec], float& mr, float& sr) {
    load_row(xr, inp + row * C);
    load_row(dr, dout + row * C);
    load_row(orow, dinp + row * C);
    mr = mean[row];
    sr = rstd[row];
  };
  if (warp < static_cast<size_t>(N)) fetch(warp, x, d, o, m, s);
  for (size_t r = warp; r < static_cast<size_t>(N); r += warps) {
    Vec16<T> xn[kVec], dn[kVec], on[kVec];
    float mn = 0.0f, sn = 0.0f;
    if (r + warps < static_cast<size_t>(N)) fetch(r + warps, xn, dn, on, mn, sn);
    float g_sum = 0.0f, gx_sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float g = load(w[v].v[e]) * load(d[v].v[e]);
        g_sum += g;
        gx_sum += layernorm_gx_term(g, load(x[v].v[e]), m, s);
      }
    }
    const float g_mean = warp_reduce(g_sum, SumOp{}) / C;
    const float gx_mean = warp_reduce(gx_sum, SumOp{}) / C;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float xe = load(x[v].v[e]), de = load(d[v].v[e]);
        o[v].v[e] = store<T>(load(o[v].v[e]) +
                             layernorm_dinp(xe, de, load(w[v].v[e]), m, s, g_mean, gx_mean));
        dw[v][e] += layernorm_dweight_term(xe, de, m, s);
        db[v][e] += de;
      }
      store_vec16(dinp + r * C + (v * 32 + lane) * E, o[v]);
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      x[v] = xn[v];
      d[v] = dn[v];
      o[v] = on[v];
    }
    m = mn;
    s = sn;
  }
  float* pw = partials + warp * 2 * C;
  float* pb = pw + C;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c0 = (v * 32 + lane) * E;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      pw[c0 + e] = dw[v][e];
      pb[c0 + e] = db[v][e];
    }
  }
}

// Calls f(std::integral_constant<int, kVec>) for kVec = vectors (1..kMaxRowVectors).
template <typename F>
void with_row_vectors(int vectors, F&& f) {
  switch (vectors) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: throw std::logic_error("rm::cuda::layernorm: no row kernel for that width");
  }
}
static_assert(kMaxRowVectors == 8, "with_row_vectors covers 1..kMaxRowVectors");

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const int vectors = row_vectors_per_lane(static_cast<size_t>(C), sizeof(T));
  if (vectors > 0 && vec16_ok<T>(static_cast<size_t>(C), {out, inp, weight, bias})) {
    with_row_vectors(vectors, [&](auto kvec) {
      RM_CUDA_LAUNCH((layernorm_forward_rows_kernel<T, decltype(kvec)::value, false>),
                     warp_per_row_launch(static_cast<size_t>(N)), stream, out, mean, rstd, inp,
                     nullptr, nullptr, weight, bias, N, C);
    });
    return;
  }
  RM_CUDA_LAUNCH(layernorm_forward_kernel<T>, row_launch(N, C), stream, out, mean, rstd, inp,
                 weight, bias, C);
}

template <typename T>
void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a, const T* b,
                                const T* weight, const T* bias, int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const int vectors = row_vectors_per_lane(static_cast<size_t>(C), sizeof(T));
  // The rows kernel where layernorm_forward would take it for the sum (so that a layernorm of
  // the kept sum, as recomputation does, gives the same bits), else the two calls.
  if (vectors > 0 && vec16_ok<T>(static_cast<size_t>(C), {sum, out, a, b, weight, bias})) {
    with_row_vectors(vectors, [&](auto kvec) {
      RM_CUDA_LAUNCH((layernorm_forward_rows_kernel<T, decltype(kvec)::value, true>),
                     warp_per_row_launch(static_cast<size_t>(N)), stream, out, mean, rstd, a, b,
                     sum, weight, bias, N, C);
    });
    return;
  }
  add(sum, a, b, static_cast<size_t>(N) * static_cast<size_t>(C), stream);
  layernorm_forward(out, mean, rstd, sum, weight, bias, N, C, stream);
}

template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                        const T* weight, const float* mean, const float* rstd, int N, int C,
                        float* partials, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const int vectors = row_vectors_per_lane(static_cast<size_t>(C), sizeof(T));
  if (vectors > 0 && vec16_ok<T>(static_cast<size_t>(C), {dinp, dout, inp, weight})) {
    const LaunchShape shape = layernorm_backward_launch(static_cast<size_t>(N));
    with_row_vectors(vectors, [&](auto kvec) {
      RM_CUDA_LAUNCH((layernorm_backward_rows_kernel<T, decltype(kvec)::value>), shape, stream,
                     dinp, partials, dout, inp, weight, mean, rstd, N, C);
    });
    const int warps = static_cast<int>(shape.grid * (shape.block / kWarpSize));
    launch_column_totals<2>(ColumnOutputs<2>{{dweight, dbias}}, partials, warps, C, stream);
    return;
  }
  RM_CUDA_LAUNCH(layernorm_dinp_kernel<T>, warp_per_row_launch(N), stream, dinp, dout, inp, weight,
                 mean, rstd, N, C);
  launch_column_sums<2>(ColumnOutputs<2>{{dweight, dbias}}, partials, N, C,
                        LayerNormParamTerms<T>{dout, inp, mean, rstd, C}, stream);
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int, cudaStream_t);
template void layernorm_forward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                      int, int, cudaStream_t);
template void residual_layernorm_forward<float>(float*, float*, float*, float*, const float*,
                                                const float*, const float*, const float*, int, int,
                                                cudaStream_t);
template void residual_layernorm_forward<bf16>(bf16*, bf16*, float*, float*, const bf16*,
                                               const bf16*, const bf16*, const bf16*, int, int,
                                               cudaStream_t);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, const float*, const float*, int, int, float*,
                                        cudaStream_t);
template void layernorm_backward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                       const float*, const float*, int, int, float*, cudaStream_t);

}  // namespace rm::cuda

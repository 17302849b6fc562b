#include "kernels/cuda/layernorm.h"

#include "kernels/bf16.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
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

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  RM_CUDA_LAUNCH(layernorm_forward_kernel<T>, row_launch(N, C), stream, out, mean, rstd, inp,
                 weight, bias, C);
}

template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                        const T* weight, const float* mean, const float* rstd, int N, int C,
                        float* partials, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  RM_CUDA_LAUNCH(layernorm_dinp_kernel<T>, warp_per_row_launch(N), stream, dinp, dout, inp, weight,
                 mean, rstd, N, C);
  launch_column_sums<2>(ColumnOutputs<2>{{dweight, dbias}}, partials, N, C,
                        LayerNormParamTerms<T>{dout, inp, mean, rstd, C}, stream);
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int, cudaStream_t);
template void layernorm_forward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                      int, int, cudaStream_t);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, const float*, const float*, int, int, float*,
                                        cudaStream_t);
template void layernorm_backward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                       const float*, const float*, int, int, float*, cudaStream_t);

}  // namespace rm::cuda

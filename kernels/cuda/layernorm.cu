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

// Block per row: dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight * dout.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                          const float* rstd, int C) {
  const size_t row = static_cast<size_t>(blockIdx.x) * C;
  const T* x = inp + row;
  const T* d = dout + row;
  T* dx = dinp + row;
  const float m = mean[blockIdx.x], s = rstd[blockIdx.x];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = load(weight[c]) * load(d[c]);
    g_sum += g;
    gx_sum += layernorm_gx_term(g, load(x[c]), m, s);
  }
  const float g_mean = block_sum(g_sum) / C;
  const float gx_mean = block_sum(gx_sum) / C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
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
                        cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  RM_CUDA_LAUNCH(layernorm_dinp_kernel<T>, row_launch(N, C), stream, dinp, dout, inp, weight, mean,
                 rstd, C);
  launch_column_sums<2>(ColumnOutputs<2>{{dweight, dbias}}, N, C,
                        LayerNormParamTerms<T>{dout, inp, mean, rstd, C}, stream);
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int, cudaStream_t);
template void layernorm_forward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                      int, int, cudaStream_t);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, const float*, const float*, int, int,
                                        cudaStream_t);
template void layernorm_backward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                       const float*, const float*, int, int, cudaStream_t);

}  // namespace rm::cuda

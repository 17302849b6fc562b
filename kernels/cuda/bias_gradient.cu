#include "kernels/cuda/bias_gradient.h"

#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_util.h"

namespace rm::cuda {
namespace {

constexpr int kLanes = 32;                    // threads along the columns, 8 columns each
constexpr int kRowLanes = 8;                  // threads along the rows
constexpr int kBlockCols = kLanes * 8;        // 256 columns a block
constexpr int kThreads = kLanes * kRowLanes;  // 256

__global__ void __launch_bounds__(kThreads)
    bias_partials_kernel(float* partials, const bf16* dout, int N, int OC) {
  __shared__ float part[kRowLanes][kBlockCols];
  const int lane = static_cast<int>(threadIdx.x % kLanes),
            y = static_cast<int>(threadIdx.x / kLanes);
  const int c0 = static_cast<int>(blockIdx.x) * kBlockCols + lane * 8;
  const int first = static_cast<int>(blockIdx.y * kColumnSumChunkRows);
  const int last = min(N, first + static_cast<int>(kColumnSumChunkRows));
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if (c0 < OC) {
    for (int n = first + y; n < last; n += kRowLanes) {
      const Vec16<bf16> v = load_vec16(dout + static_cast<size_t>(n) * OC + c0);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] += load(v.v[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) part[y][lane * 8 + k] = acc[k];
  __syncthreads();
  const int c = static_cast<int>(blockIdx.x) * kBlockCols + static_cast<int>(threadIdx.x);
  if (c < OC) {
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < kRowLanes; ++r) s += part[r][threadIdx.x];
    partials[static_cast<size_t>(blockIdx.y) * OC + c] = s;
  }
}

__global__ void __launch_bounds__(kThreads)
    bias_totals_kernel(float* dbias, const float* partials, int chunks, int OC) {
  const int c = static_cast<int>(blockIdx.x * kThreads + threadIdx.x);
  if (c >= OC) return;
  float s = 0.0f;
  for (int ch = 0; ch < chunks; ++ch) s += partials[static_cast<size_t>(ch) * OC + c];
  dbias[c] += s;
}

}  // namespace

bool bias_gradient_vectorizable(int OC, const void* dout) {
  return OC > 0 && OC % 8 == 0 && reinterpret_cast<std::uintptr_t>(dout) % 16 == 0;
}

void bias_gradient(float* dbias, const bf16* dout, int N, int OC, float* partials,
                   cudaStream_t stream) {
  if (N <= 0 || OC <= 0) return;
  if (!bias_gradient_vectorizable(OC, dout)) {
    throw std::invalid_argument(
        "rm::cuda bias_gradient: OC must be a multiple of 8 and dout "
        "16-byte aligned");
  }
  const ColumnSumShape shape = column_sum_shape(static_cast<size_t>(N), static_cast<size_t>(OC), 1);
  const unsigned groups = static_cast<unsigned>((OC + kBlockCols - 1) / kBlockCols);
  bias_partials_kernel<<<dim3(groups, shape.chunks), kThreads, 0, stream>>>(partials, dout, N, OC);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
  bias_totals_kernel<<<static_cast<unsigned>((OC + kThreads - 1) / kThreads), kThreads, 0,
                       stream>>>(dbias, partials, static_cast<int>(shape.chunks), OC);
  RM_CUDA_CHECK(cudaGetLastError(), kThrow);
}

}  // namespace rm::cuda

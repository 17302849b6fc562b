#include "kernels/cuda/gemm.h"

#include "kernels/bf16.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

// out[n, c] = bias[c] for the OC columns of rows ld elements apart (total = N * ld).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    broadcast_rows_kernel(T* out, const T* bias, int OC, int ld, size_t total) {
  RM_GRID_STRIDE_LOOP(i, total) {
    const int c = static_cast<int>(i % ld);
    if (c < OC) out[i] = bias[c];
  }
}

// The bias gradient's term: dout[n, o].
template <typename T>
struct DoutTerm {
  const T* dout;
  int OC;
  __device__ void operator()(int n, int o, float (&t)[1]) const {
    t[0] = load(dout[static_cast<size_t>(n) * OC + o]);
  }
};

}  // namespace

template <typename T>
void linear_forward(const Blas& blas, T* out, const T* inp, const T* weight, const T* bias, int N,
                    int C, int OC, DeviceScratch& rows, cudaStream_t stream) {
  const bool seed = bias != nullptr && N > 0 && OC > 0;
  RowMajorGemm g = linear_forward_gemm(N, C, OC, seed);
  const int ld = padded_row_length(OC, sizeof(T));
  g.ldc = ld;
  to_cublas(g);  // validates before anything is queued
  T* dst = ld == OC || N == 0 ? out : rows.get<T>(static_cast<size_t>(N) * ld, stream);
  if (seed) {
    const size_t total = static_cast<size_t>(N) * ld;
    RM_CUDA_LAUNCH(broadcast_rows_kernel<T>, elementwise_launch(total), stream, dst, bias, OC, ld,
                   total);
  }
  gemm(blas, g, inp, weight, dst);
  if (dst != out) {
    RM_CUDA_CHECK(cudaMemcpy2DAsync(out, OC * sizeof(T), dst, ld * sizeof(T), OC * sizeof(T), N,
                                    cudaMemcpyDeviceToDevice, stream),
                  kThrow);
  }
}

template <typename T>
void linear_backward(const Blas& blas, T* dinp, float* dweight, float* dbias, const T* dout,
                     const T* inp, const T* weight, int N, int C, int OC, DeviceScratch& rows,
                     cudaStream_t stream) {
  RowMajorGemm gi = linear_dinp_gemm(N, C, OC);
  const RowMajorGemm gw = linear_dweight_gemm(N, C, OC);
  const int ld = padded_row_length(OC, sizeof(T));
  gi.lda = ld;
  to_cublas(gi);  // both validated before anything is queued
  to_cublas(gw);
  if (dinp != nullptr) {
    const T* src = dout;
    if (ld != OC && N > 0) {
      T* padded = rows.get<T>(static_cast<size_t>(N) * ld, stream);
      RM_CUDA_CHECK(cudaMemcpy2DAsync(padded, ld * sizeof(T), dout, OC * sizeof(T),
                                      OC * sizeof(T), N, cudaMemcpyDeviceToDevice, stream),
                    kThrow);
      src = padded;
    }
    gemm(blas, gi, src, weight, dinp);
  }
  gemm(blas, gw, dout, inp, dweight);  // dout's rows are its columns here: fast as they are
  if (dbias != nullptr && N > 0 && OC > 0) {
    launch_column_sums<1>(ColumnOutputs<1>{{dbias}}, N, OC, DoutTerm<T>{dout, OC}, stream);
  }
}

template void linear_forward<float>(const Blas&, float*, const float*, const float*, const float*,
                                    int, int, int, DeviceScratch&, cudaStream_t);
template void linear_forward<bf16>(const Blas&, bf16*, const bf16*, const bf16*, const bf16*, int,
                                   int, int, DeviceScratch&, cudaStream_t);
template void linear_backward<float>(const Blas&, float*, float*, float*, const float*,
                                     const float*, const float*, int, int, int, DeviceScratch&,
                                     cudaStream_t);
template void linear_backward<bf16>(const Blas&, bf16*, float*, float*, const bf16*, const bf16*,
                                    const bf16*, int, int, int, DeviceScratch&, cudaStream_t);

}  // namespace rm::cuda

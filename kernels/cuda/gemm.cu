#include "kernels/cuda/gemm.h"

#include "kernels/bf16.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    broadcast_rows_kernel(T* out, const T* bias, int OC, size_t total) {
  RM_GRID_STRIDE_LOOP(i, total) {
    out[i] = bias[i % OC];
  }
}

// The same, 16 bytes at a time (OC a whole number of Vec16<T>, out and bias aligned).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    broadcast_rows_vec_kernel(T* out, const T* bias, int OC, size_t vectors) {
  constexpr int E = Vec16<T>::kElems;
  const size_t row_vectors = static_cast<size_t>(OC) / E;
  RM_GRID_STRIDE_LOOP(i, vectors) {
    store_vec16(out + i * E, load_vec16(bias + (i % row_vectors) * E));
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
                    int C, int OC, cudaStream_t stream) {
  const bool seed = bias != nullptr && N > 0 && OC > 0;
  const RowMajorGemm g = linear_forward_gemm(N, C, OC, seed);
  to_cublas(g);  // validates before anything is queued
  if (seed) {
    const size_t total = static_cast<size_t>(N) * OC;
    if (OC % Vec16<T>::kElems == 0 && vec16_ok<T>(total, {out, bias})) {
      const size_t vectors = total / Vec16<T>::kElems;
      RM_CUDA_LAUNCH(broadcast_rows_vec_kernel<T>, elementwise_launch(vectors), stream, out, bias,
                     OC, vectors);
    } else {
      RM_CUDA_LAUNCH(broadcast_rows_kernel<T>, elementwise_launch(total), stream, out, bias, OC,
                     total);
    }
  }
  gemm(blas, g, inp, weight, out);
}

template <typename T>
void linear_backward(const Blas& blas, T* dinp, float* dweight, float* dbias, const T* dout,
                     const T* inp, const T* weight, int N, int C, int OC, float* partials,
                     cudaStream_t stream) {
  const RowMajorGemm gi = linear_dinp_gemm(N, C, OC), gw = linear_dweight_gemm(N, C, OC);
  to_cublas(gi);  // both validated before anything is queued
  to_cublas(gw);
  if (dinp != nullptr) gemm(blas, gi, dout, weight, dinp);
  gemm(blas, gw, dout, inp, dweight);
  if (dbias != nullptr && N > 0 && OC > 0) {
    launch_column_sums<1>(ColumnOutputs<1>{{dbias}}, partials, N, OC, DoutTerm<T>{dout, OC},
                          stream);
  }
}

template void linear_forward<float>(const Blas&, float*, const float*, const float*, const float*,
                                    int, int, int, cudaStream_t);
template void linear_forward<bf16>(const Blas&, bf16*, const bf16*, const bf16*, const bf16*, int,
                                   int, int, cudaStream_t);
template void linear_backward<float>(const Blas&, float*, float*, float*, const float*,
                                     const float*, const float*, int, int, int, float*,
                                     cudaStream_t);
template void linear_backward<bf16>(const Blas&, bf16*, float*, float*, const bf16*, const bf16*,
                                    const bf16*, int, int, int, float*, cudaStream_t);

}  // namespace rm::cuda

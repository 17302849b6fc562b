#include "kernels/cuda/residual.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    add_kernel(T* out, const T* a, const T* b, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    out[i] = store<T>(load(a[i]) + load(b[i]));
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    add_inplace_kernel(float* acc, const T* x, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    acc[i] += load(x[i]);
  }
}

// The same, 16 bytes at a time (vectors = n / Vec16<T>::kElems).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    add_vec_kernel(T* out, const T* a, const T* b, size_t vectors) {
  constexpr int E = Vec16<T>::kElems;
  RM_GRID_STRIDE_LOOP(i, vectors) {
    const Vec16<T> x = load_vec16(a + i * E), y = load_vec16(b + i * E);
    Vec16<T> o;
#pragma unroll
    for (int e = 0; e < E; ++e) o.v[e] = store<T>(load(x.v[e]) + load(y.v[e]));
    store_vec16(out + i * E, o);
  }
}

}  // namespace

template <typename T>
void add(T* out, const T* a, const T* b, size_t n, cudaStream_t stream) {
  if (vec16_ok<T>(n, {out, a, b})) {
    const size_t vectors = n / Vec16<T>::kElems;
    RM_CUDA_LAUNCH(add_vec_kernel<T>, elementwise_launch(vectors), stream, out, a, b, vectors);
    return;
  }
  RM_CUDA_LAUNCH(add_kernel<T>, elementwise_launch(n), stream, out, a, b, n);
}

template <typename T>
void add_inplace(float* acc, const T* x, size_t n, cudaStream_t stream) {
  RM_CUDA_LAUNCH(add_inplace_kernel<T>, elementwise_launch(n), stream, acc, x, n);
}

template void add<float>(float*, const float*, const float*, size_t, cudaStream_t);
template void add<bf16>(bf16*, const bf16*, const bf16*, size_t, cudaStream_t);
template void add_inplace<float>(float*, const float*, size_t, cudaStream_t);
template void add_inplace<bf16>(float*, const bf16*, size_t, cudaStream_t);

}  // namespace rm::cuda

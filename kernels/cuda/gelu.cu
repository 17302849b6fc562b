#include "kernels/cuda/gelu.h"

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/elementwise_math.h"

namespace rm::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_forward_kernel(T* out, const T* inp, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    out[i] = store<T>(gelu_tanh(load(inp[i])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
  RM_GRID_STRIDE_LOOP(i, n) {
    dinp[i] = store<T>(gelu_tanh_grad(load(inp[i])) * load(dout[i]));
  }
}

// The same, 16 bytes at a time (vectors = n / Vec16<T>::kElems).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_forward_vec_kernel(T* out, const T* inp, size_t vectors) {
  constexpr int E = Vec16<T>::kElems;
  RM_GRID_STRIDE_LOOP(i, vectors) {
    const Vec16<T> x = load_vec16(inp + i * E);
    Vec16<T> o;
#pragma unroll
    for (int e = 0; e < E; ++e) o.v[e] = store<T>(gelu_tanh(load(x.v[e])));
    store_vec16(out + i * E, o);
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_backward_vec_kernel(T* dinp, const T* inp, const T* dout, size_t vectors) {
  constexpr int E = Vec16<T>::kElems;
  RM_GRID_STRIDE_LOOP(i, vectors) {
    const Vec16<T> x = load_vec16(inp + i * E), d = load_vec16(dout + i * E);
    Vec16<T> o;
#pragma unroll
    for (int e = 0; e < E; ++e) o.v[e] = store<T>(gelu_tanh_grad(load(x.v[e])) * load(d.v[e]));
    store_vec16(dinp + i * E, o);
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
  if (vec16_ok<T>(n, {out, inp})) {
    const size_t vectors = n / Vec16<T>::kElems;
    RM_CUDA_LAUNCH(gelu_forward_vec_kernel<T>, elementwise_launch(vectors), stream, out, inp,
                   vectors);
    return;
  }
  RM_CUDA_LAUNCH(gelu_forward_kernel<T>, elementwise_launch(n), stream, out, inp, n);
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
  if (vec16_ok<T>(n, {dinp, inp, dout})) {
    const size_t vectors = n / Vec16<T>::kElems;
    RM_CUDA_LAUNCH(gelu_backward_vec_kernel<T>, elementwise_launch(vectors), stream, dinp, inp,
                   dout, vectors);
    return;
  }
  RM_CUDA_LAUNCH(gelu_backward_kernel<T>, elementwise_launch(n), stream, dinp, inp, dout, n);
}

template void gelu_forward<float>(float*, const float*, size_t, cudaStream_t);
template void gelu_forward<bf16>(bf16*, const bf16*, size_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, size_t, cudaStream_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, size_t, cudaStream_t);

}  // namespace rm::cuda

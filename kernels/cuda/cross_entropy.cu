#include "kernels/cuda/cross_entropy.h"

#include <math_constants.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/bf16.h"
#include "kernels/cuda/kernel_util.cuh"
#include "kernels/cuda/launch_check.h"
#include "kernels/cuda/reduce.h"
#include "kernels/elementwise_math.h"
#include "kernels/gpu_switches.h"
#include "kernels/row_math.h"

namespace rm::cuda {
namespace {

__global__ void __launch_bounds__(1) reset_status_kernel(CrossEntropyStatus* status, int N) {
  status->loss = 0.0;
  status->bad_row = N;
}

__global__ void __launch_bounds__(kElementwiseThreads)
    check_targets_kernel(CrossEntropyStatus* status, const int* targets, int N, int V) {
  RM_GRID_STRIDE_LOOP(n, static_cast<size_t>(N)) {
    if (targets[n] >= V) atomicMin(&status->bad_row, static_cast<int>(n));
  }
}

// Block per row of ld elements, the first V the vocabulary's: max, then the exp sum (float per
// thread, double across threads), then the loss and, with kGrad, the gradient written over the
// logits, and zeros over the padding columns [V, ld).
template <typename T, bool kGrad>
__global__ void __launch_bounds__(kMaxRowThreads)
    cross_entropy_kernel(const CrossEntropyStatus* status, double* row_loss, T* logits,
                         const int* targets, int N, int V, int ld, float grad_scale) {
  if (status->bad_row < N) return;  // the whole block returns: bad_row is the same for all
  T* x = logits + static_cast<size_t>(blockIdx.x) * ld;
  if (kGrad) {
    for (int j = V + static_cast<int>(threadIdx.x); j < ld; j += blockDim.x) x[j] = store<T>(0.0f);
  }
  const int t = targets[blockIdx.x];
  if (t < 0) {
    if (kGrad) {
      for (int j = threadIdx.x; j < V; j += blockDim.x) x[j] = store<T>(0.0f);
    }
    if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.0;
    return;
  }
  const float xt = load(x[t]);  // read before any thread overwrites it (the reductions sync)
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, load(x[j]));
  mx = block_max(mx);
  float part = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) part += fast_expf(load(x[j]) - mx);
  const double sum = block_sum(static_cast<double>(part));
  if (threadIdx.x == 0) row_loss[blockIdx.x] = cross_entropy_row_loss(sum, mx, xt);
  if (kGrad) {
    const float f = cross_entropy_grad_factor(grad_scale, sum);
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      float g = fast_expf(load(x[j]) - mx) * f;
      if (j == t) g -= grad_scale;
      x[j] = store<T>(g);
    }
  }
}

// The same, 16 bytes at a time: rows of ld elements, ld a whole number of Vec16<T> and the
// logits 16-byte aligned (the padded classifier's rows: cuda_layers.cc). The max pass reads the
// row from global memory; the sum and gradient passes read it again: from global memory (mostly
// L2, 100 KB a row at GPT-2's 50304), or with kRowInSmem from the copy the first pass left in
// shared memory (ld * sizeof(T) bytes of dynamic shared memory): one read of the logits from
// global memory instead of three. Each thread reads back only the vectors it wrote, so the copy
// needs no barrier, and every thread sums the same elements in the same order either way: the
// same bits.
template <typename T, bool kGrad, bool kRowInSmem>
__global__ void __launch_bounds__(kMaxRowThreads)
    cross_entropy_vec_kernel(const CrossEntropyStatus* status, double* row_loss, T* logits,
                             const int* targets, int N, int V, int ld, float grad_scale) {
  extern __shared__ uint4 row_copy[];  // kRowInSmem: the row's vectors
  if (status->bad_row < N) return;  // the whole block returns: bad_row is the same for all
  constexpr int E = Vec16<T>::kElems;
  T* x = logits + static_cast<size_t>(blockIdx.x) * ld;
  const int vectors = ld / E;
  auto reread = [&](int q) {  // vector q of the row after the first pass
    if constexpr (kRowInSmem) {
      Vec16<T> v;
      *reinterpret_cast<uint4*>(v.v) = row_copy[q];
      return v;
    } else {
      return load_vec16(x + q * E);
    }
  };
  const int t = targets[blockIdx.x];
  if (t < 0) {
    if (kGrad) {
      Vec16<T> zero;
#pragma unroll
      for (int e = 0; e < E; ++e) zero.v[e] = store<T>(0.0f);
      for (int q = threadIdx.x; q < vectors; q += blockDim.x) store_vec16(x + q * E, zero);
    }
    if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.0;
    return;
  }
  const float xt = load(x[t]);  // read before any thread overwrites it (the reductions sync)
  float mx = -INFINITY;
  for (int q = threadIdx.x; q < vectors; q += blockDim.x) {
    const Vec16<T> v = load_vec16(x + q * E);
    if constexpr (kRowInSmem) row_copy[q] = *reinterpret_cast<const uint4*>(v.v);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (q * E + e < V) mx = fmaxf(mx, load(v.v[e]));
    }
  }
  mx = block_max(mx);
  float part = 0.0f;
  for (int q = threadIdx.x; q < vectors; q += blockDim.x) {
    const Vec16<T> v = reread(q);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (q * E + e < V) part += fast_expf(load(v.v[e]) - mx);
    }
  }
  const double sum = block_sum(static_cast<double>(part));
  if (threadIdx.x == 0) row_loss[blockIdx.x] = cross_entropy_row_loss(sum, mx, xt);
  if (kGrad) {
    const float f = cross_entropy_grad_factor(grad_scale, sum);
    for (int q = threadIdx.x; q < vectors; q += blockDim.x) {
      const Vec16<T> v = reread(q);
      Vec16<T> d;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int j = q * E + e;
        float g = j < V ? fast_expf(load(v.v[e]) - mx) * f : 0.0f;
        if (j == t) g -= grad_scale;
        d.v[e] = store<T>(g);
      }
      store_vec16(x + q * E, d);
    }
  }
}

// RM_CUDA_CE_ROW_IN_SMEM, read once: "1" keeps each row in shared memory; unset, empty or "0"
// does not; anything else is refused, naming the variable.
bool row_in_smem_from_environment() {
  static const bool on = gpu_switch_value(kCrossEntropyRowSwitch) == 1;
  return on;
}

// Whether a row of `bytes` fits the current device's shared memory a block (the opt-in limit).
// Whether `kernel` may be given `bytes` of dynamic shared memory a block: the opt-in limit less
// the kernel's own static shared memory (block_reduce's), which counts against the same limit --
// a row within 384 bytes of it would otherwise be refused by cudaFuncSetAttribute, not reread.
template <typename Kernel>
bool fits_in_smem(Kernel* kernel, size_t bytes) {
  int device = 0, limit = 0;
  RM_CUDA_CHECK(cudaGetDevice(&device), kThrow);
  RM_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                kThrow);
  cudaFuncAttributes own{};
  RM_CUDA_CHECK(cudaFuncGetAttributes(&own, kernel), kThrow);
  return bytes + own.sharedSizeBytes <= static_cast<size_t>(limit);
}

template <typename T, bool kGrad>
void run(CrossEntropyStatus* status, double* row_loss, T* logits, const int* targets, int N, int V,
         int ld, float grad_scale, CrossEntropyRow row, cudaStream_t stream) {
  RM_CUDA_LAUNCH(reset_status_kernel, (LaunchShape{1, 1}), stream, status, N);
  if (N <= 0) return;
  RM_CUDA_LAUNCH(check_targets_kernel, elementwise_launch(static_cast<size_t>(N)), stream, status,
                 targets, N, V);
  const bool vec = ld % Vec16<T>::kElems == 0 && vec16_ok<T>(0, {logits});
  const LaunchShape shape = row_launch(N, vec ? ld / Vec16<T>::kElems : V);
  const size_t row_bytes = static_cast<size_t>(ld) * sizeof(T);
  if (row == CrossEntropyRow::kEnvironment) {
    row = row_in_smem_from_environment() ? CrossEntropyRow::kInSharedMemory
                                         : CrossEntropyRow::kReread;
  }
  const auto smem_kernel = &cross_entropy_vec_kernel<T, kGrad, true>;
  if (vec && row == CrossEntropyRow::kInSharedMemory && fits_in_smem(smem_kernel, row_bytes)) {
    const auto kernel = smem_kernel;
    RM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(row_bytes)),
                  kThrow);
    kernel<<<shape.grid, shape.block, row_bytes, stream>>>(status, row_loss, logits, targets, N, V,
                                                           ld, grad_scale);
    RM_CUDA_CHECK(cudaGetLastError(), kThrow);
  } else {
    const auto kernel =
        vec ? &cross_entropy_vec_kernel<T, kGrad, false> : &cross_entropy_kernel<T, kGrad>;
    RM_CUDA_LAUNCH(kernel, shape, stream, status, row_loss, logits, targets, N, V, ld, grad_scale);
  }
  sum_doubles(&status->loss, row_loss, static_cast<size_t>(N), stream);
}

__global__ void __launch_bounds__(1)
    accumulate_kernel(CrossEntropyTotal* total, const CrossEntropyStatus* status,
                      const int* targets, int N) {
  if (status->bad_row < N) {
    if (total->bad == 0) {
      total->bad = 1;
      total->bad_row = status->bad_row;
      total->bad_target = targets[status->bad_row];
    }
    return;  // that call's row losses were never written
  }
  total->loss += status->loss;
}

__global__ void __launch_bounds__(1)
    copy_total_kernel(double* dst, const CrossEntropyTotal* total) {
  *dst = total->bad != 0 ? CUDART_NAN : total->loss;
}

}  // namespace

void accumulate_cross_entropy(CrossEntropyTotal* total, const CrossEntropyStatus* status,
                              const int* targets, int N, cudaStream_t stream) {
  RM_CUDA_LAUNCH(accumulate_kernel, (LaunchShape{1, 1}), stream, total, status, targets, N);
}

void copy_cross_entropy_total(double* dst, const CrossEntropyTotal* total, cudaStream_t stream) {
  RM_CUDA_LAUNCH(copy_total_kernel, (LaunchShape{1, 1}), stream, dst, total);
}

template <typename T>
void cross_entropy_forward(CrossEntropyStatus* status, double* row_loss, const T* logits,
                           const int* targets, int N, int V, cudaStream_t stream) {
  // The kernel without kGrad never writes through the pointer.
  run<T, false>(status, row_loss, const_cast<T*>(logits), targets, N, V, V, 0.0f,
                CrossEntropyRow::kEnvironment, stream);
}

template <typename T>
void cross_entropy_forward_backward(CrossEntropyStatus* status, double* row_loss,
                                    T* logits_then_dlogits, const int* targets, int N, int V,
                                    int ld, float grad_scale, cudaStream_t stream,
                                    CrossEntropyRow row) {
  run<T, true>(status, row_loss, logits_then_dlogits, targets, N, V, ld, grad_scale, row, stream);
}

template void cross_entropy_forward<float>(CrossEntropyStatus*, double*, const float*, const int*,
                                           int, int, cudaStream_t);
template void cross_entropy_forward<bf16>(CrossEntropyStatus*, double*, const bf16*, const int*,
                                          int, int, cudaStream_t);
template void cross_entropy_forward_backward<float>(CrossEntropyStatus*, double*, float*,
                                                    const int*, int, int, int, float, cudaStream_t,
                                                    CrossEntropyRow);
template void cross_entropy_forward_backward<bf16>(CrossEntropyStatus*, double*, bf16*, const int*,
                                                   int, int, int, float, cudaStream_t,
                                                   CrossEntropyRow);

}  // namespace rm::cuda

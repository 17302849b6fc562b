// Device-side helpers shared by the CUDA kernels: the grid-stride loop and the block
// reductions. This is the only intra-block cooperation (shared memory, __syncthreads, warp
// shuffles) in the backend, kept here, small, so it is reviewed once.
//
// Block reductions require blockDim.x to be a multiple of 32 and at most 1024 (row_launch and
// reduce_launch in launch_util.h guarantee it), and every thread of the block must call them
// (no thread may have returned). Every thread receives the result. The reduction tree is fixed
// (xor butterflies within a warp, then across warps), so results are deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

// for (size_t i = <global thread index>; i < n; i += <grid size>)
#define RM_GRID_STRIDE_LOOP(i, n)                                         \
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += size_t{blockDim.x} * gridDim.x)

namespace rm::cuda {

struct SumOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename V, typename Op>
__device__ inline V warp_reduce(V v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <typename V, typename Op>
__device__ inline V block_reduce(V v, Op op, V identity) {
  __shared__ V warp_values[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call's readers of warp_values are done
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  // Every warp reduces the per-warp values, so every thread ends with the total.
  v = lane < warps ? warp_values[lane] : identity;
  return warp_reduce(v, op);
}

__device__ inline float block_sum(float v) {
  return block_reduce(v, SumOp{}, 0.0f);
}
__device__ inline double block_sum(double v) {
  return block_reduce(v, SumOp{}, 0.0);
}
__device__ inline float block_max(float v) {
  return block_reduce(v, MaxOp{}, -INFINITY);
}

// 16 bytes of T (8 bf16 or 4 floats) moved by one load or store instruction: row kernels read a
// row's elements a vector at a time where the row length and pointers allow it (pointers
// 16-byte aligned).
template <typename T>
struct Vec16 {
  static constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  alignas(16) T v[kElems];
};
template <typename T>
__device__ inline Vec16<T> load_vec16(const T* p) {
  Vec16<T> r;
  *reinterpret_cast<uint4*>(r.v) = *reinterpret_cast<const uint4*>(p);
  return r;
}
template <typename T>
__device__ inline void store_vec16(T* p, const Vec16<T>& r) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(r.v);
}

// Whether every pointer is 16-byte aligned and n a whole number of Vec16<T>: the element-wise
// kernels then move 16 bytes an instruction (their scalar 2-byte bf16 loads reached about a
// third of an H200's bandwidth).
template <typename T>
inline bool vec16_ok(size_t n, std::initializer_list<const void*> pointers) {
  if (n % Vec16<T>::kElems != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

}  // namespace rm::cuda

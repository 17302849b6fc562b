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

}  // namespace rm::cuda

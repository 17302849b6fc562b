// RM_CUDA_LAUNCH(kernel, shape, stream, args...): launches `kernel` with a LaunchShape
// (launch_util.h) on `stream`, skips empty shapes, and checks cudaGetLastError() right after the
// launch (launch errors are reported late otherwise). For .cu files only.
#pragma once

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_util.h"

#define RM_CUDA_LAUNCH(kernel, shape, stream, ...)                         \
  do {                                                                     \
    const ::rm::cuda::LaunchShape rm_shape = (shape);                      \
    if (rm_shape.grid > 0) {                                               \
      kernel<<<rm_shape.grid, rm_shape.block, 0, (stream)>>>(__VA_ARGS__); \
      RM_CUDA_CHECK(cudaGetLastError(), ::rm::cuda::kThrow);               \
    }                                                                      \
  } while (0)

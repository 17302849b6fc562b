// RM_HOST_DEVICE marks a function that both backends compile: nvcc as __host__ __device__ (the
// CUDA kernels call it), the host compiler as a plain inline function (the CPU kernels call it).
#pragma once

#ifdef __CUDACC__
#define RM_HOST_DEVICE __host__ __device__
#else
#define RM_HOST_DEVICE
#endif

// The cuda backend of the compute interface (kernels/compute.h): device memory from
// cudaMalloc, kernels and cuBLAS calls queued on one compute stream of the selected device,
// checkpoint downloads on a side stream into pinned host memory.
//
// GEMMs: cuBLAS (cublasGemmEx / strided-batched for attention), fp32 jobs with TF32 tensor cores
// when allowed, bf16 jobs with bf16 inputs and fp32 accumulation. Every other kernel is a thin
// wrapper around the RM_HOST_DEVICE math the CPU kernels also use.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>

#include "kernels/compute.h"

namespace rm::cuda {

// GPUs this process can use (CUDA_VISIBLE_DEVICES applies); 0 when the driver is missing or
// reports no device, with the reason in *why.
int visible_device_count(std::string* why);
// Total memory of visible GPU `device` in bytes (cudaGetDeviceProperties: no context is
// created); 0 when there is no such device.
size_t device_memory(int device);
// Visible GPU `device`'s UUID as 32 hex digits (cudaGetDeviceProperties: no context is created),
// the same whatever CUDA_VISIBLE_DEVICES numbers it; "" when there is no such device.
std::string device_uuid(int device);

// Selects `device` (cudaSetDevice) for the calling thread and creates the streams and cuBLAS
// handle. notes: where it says what it chose (ComputeOptions::notes). Throws
// std::runtime_error naming the device when it is not usable.
std::unique_ptr<Compute> make_cuda_compute(int device, bool allow_tf32, std::FILE* notes = stdout);

}  // namespace rm::cuda

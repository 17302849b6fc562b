// Choosing and making a Compute backend (kernels/compute.h).
//
// The cuda backend exists only in builds where CMake found CUDA (RM_HAVE_CUDA); elsewhere
// asking for it is an error that says so. Device indices count the GPUs this process sees, so
// CUDA_VISIBLE_DEVICES is honoured by construction.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>

#include "kernels/compute.h"

namespace rm {

struct ComputeOptions {
  int threads = 0;          // cpu: OpenMP and BLAS threads of the calling thread (0: as is)
  int device = 0;           // cuda: index among the visible GPUs
  bool allow_tf32 = true;   // cuda: fp32 GEMMs on TF32 tensor cores
  // cuda: where the backend says what it chose (cuDNN's attention, its shapes): stdout in a
  // rank (rank 0's console and every rank's log, observe/rank_log.h); stderr for a command whose
  // stdout is its output (eval).
  std::FILE* notes = stdout;
};

// Sets the calling thread's OpenMP and BLAS thread count (the cpu backend's, and any host-side
// parallel loop's) and returns it: n, at least 1, at most OMP_THREAD_LIMIT.
int set_host_threads(int n);

// Whether this build has the cuda backend.
bool cuda_compiled();

// How many GPUs this process can use: 0 when the build has no CUDA, there is no driver or no
// device. When 0, *why (if given) says which, in words for a user.
int cuda_device_count(std::string* why = nullptr);

// Bytes of memory of visible GPU `device`; 0 when there is no such GPU or no CUDA in this build.
size_t cuda_device_memory(int device);

// Visible GPU `device`'s UUID (32 hex digits): which physical GPU it is, whatever index
// CUDA_VISIBLE_DEVICES gives it; "" when there is no such GPU or no CUDA in this build.
std::string cuda_device_uuid(int device);

// Throws std::runtime_error when the backend cannot start (no CUDA in this build, no such GPU).
std::unique_ptr<Compute> make_compute(ComputeKind kind, const ComputeOptions& options);

}  // namespace rm

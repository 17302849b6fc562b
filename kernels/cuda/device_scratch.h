// Grow-only device scratch for kernels that need temporary space the interface does not pass
// (bf16 attention scores, per-row losses). It grows to the largest request and then stays, so
// after the first step nothing allocates. Growing waits for `in_use_on`, the stream whose queued
// kernels may still use the old buffer, before freeing it. Not thread-safe (one Compute, one
// thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rm::cuda {

class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // At least `bytes` of device memory, uninitialised; valid until the next larger request.
  void* get(size_t bytes, cudaStream_t in_use_on);
  template <typename T>
  T* get(size_t n, cudaStream_t in_use_on) {
    return static_cast<T*>(get(n * sizeof(T), in_use_on));
  }
  // How many times the buffer moved (was allocated anew): a recorded step graph that uses it is
  // stale once this changes (Compute::has_graph).
  uint64_t moves() const { return moves_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  uint64_t moves_ = 0;
};

}  // namespace rm::cuda

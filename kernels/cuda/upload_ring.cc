#include "kernels/cuda/upload_ring.h"

#include <cstring>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"

namespace rm::cuda {

UploadRing::~UploadRing() {
  if (pinned_ == nullptr) return;
  // No throwing from a destructor: a failure here only leaks the slots.
  for (int i = 0; i < kSlots; ++i) {
    if (in_use_[i]) cudaEventSynchronize(done_[i]);
    cudaEventDestroy(done_[i]);
  }
  cudaFreeHost(pinned_);
}

void UploadRing::upload(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (!fits(bytes)) throw std::logic_error("UploadRing::upload: larger than a slot");
  if (bytes == 0) return;
  if (pinned_ == nullptr) {
    void* p = nullptr;
    RM_CUDA_CHECK(cudaMallocHost(&p, kSlots * kSlotBytes), kThrow);
    pinned_ = static_cast<char*>(p);
    for (int i = 0; i < kSlots; ++i) {
      RM_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming), kThrow);
    }
  }
  const int slot = next_;
  next_ = (next_ + 1) % kSlots;
  if (in_use_[slot]) RM_CUDA_CHECK(cudaEventSynchronize(done_[slot]), kThrow);
  char* const staged = pinned_ + static_cast<size_t>(slot) * kSlotBytes;
  std::memcpy(staged, src, bytes);
  RM_CUDA_CHECK(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream), kThrow);
  RM_CUDA_CHECK(cudaEventRecord(done_[slot], stream), kThrow);
  in_use_[slot] = true;
}

}  // namespace rm::cuda

// Small host -> device uploads that never wait for the device (the token ids of every
// micro-batch): the bytes are copied on the host into one of kSlots pinned slots and the DMA from
// that slot is queued on the stream, which from pinned memory is truly asynchronous; an event
// recorded after it says when the slot may be written again. A cudaMemcpyAsync straight from
// pageable memory may instead synchronise with the stream before staging the bytes (CUDA's "API
// synchronization behavior"): a step's second micro-batch then waited at its token upload until
// the device had run the first, and the device idled while the host launched again.
//
// The slot is reused kSlots uploads later, after its event (long complete at one or two uploads
// a micro-batch). Larger uploads (checkpoint restores, initial weights) take the plain path.
// Pinned memory is allocated on first use. One thread uses a ring (kernels/compute.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace rm::cuda {

class UploadRing {
 public:
  static constexpr size_t kSlotBytes = size_t{1} << 20;
  static constexpr int kSlots = 8;

  UploadRing() = default;
  ~UploadRing();  // waits for the copies in flight, then frees the slots
  UploadRing(const UploadRing&) = delete;
  UploadRing& operator=(const UploadRing&) = delete;

  static bool fits(size_t bytes) { return bytes <= kSlotBytes; }
  // Queues dst <- src[0, bytes) on `stream`; src may be reused on return. bytes <= kSlotBytes.
  void upload(void* dst, const void* src, size_t bytes, cudaStream_t stream);

 private:
  char* pinned_ = nullptr;  // kSlots x kSlotBytes
  cudaEvent_t done_[kSlots] = {};
  bool in_use_[kSlots] = {};
  int next_ = 0;
};

}  // namespace rm::cuda

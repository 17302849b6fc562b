// The device state one CudaCompute owns: the device, its compute stream (kernels and cuBLAS), the
// side stream of checkpoint downloads, a second compute stream for the bias gradients (gemm.h's
// SideStream), the cuBLAS and cuBLASLt handles, scratch, and a small device block that
// reductions write their results into, with a pinned mirror to download them.
//
// Created on the calling thread's device (cudaSetDevice(device) first); that thread makes every
// later call (compute.h's threading rule). Construction failures throw std::runtime_error with
// whatever was created released; the destructor waits for both streams and releases everything,
// reporting (not throwing) failures.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <memory>

#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch_util.h"
#include "kernels/cuda/lt_gemm.h"

namespace rm::cuda {

class CudnnAttention;  // cudnn_sdpa.h (built where cuDNN's headers were found: RM_HAVE_CUDNN)

// Where device reductions leave their results.
struct DeviceResults {
  CrossEntropyStatus cross_entropy;
  CrossEntropyTotal queued_cross_entropy;  // zeroed at creation and by each take
  double sum;
  double partials[kMaxReduceBlocks];  // sum_squares's first pass
};

class CudaContext {
 public:
  // notes: where cudnn_attention() says what runs (ComputeOptions::notes).
  CudaContext(int device, bool allow_tf32, std::FILE* notes = stdout);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudaStream_t side_stream() const { return side_stream_; }
  cudaEvent_t queued_event() const { return queued_; }
  // Where the Linear backwards run their bias gradients beside their GEMMs (gemm.h); null when
  // RM_CUDA_BIAS_STREAM=0 was set at creation (all on the compute stream: to time the two).
  const SideStream* bias_side() const {
    return bias_side_.stream != nullptr ? &bias_side_ : nullptr;
  }
  const Blas& blas() const { return blas_; }
  LtGemm& lt() { return *lt_; }  // cuBLASLt on the compute stream, its workspace and plans
  DeviceResults* results() const { return results_; }
  // Scratch of at least n elements (grow-only, device_scratch.h), valid until the next larger
  // request of the same kind. A growth frees the old buffer once the compute stream is done
  // with it: work on the bias side stream that uses one (column sums) must be joined back into
  // the compute stream (join_side) before the next request, as linear_backward* do.
  float* attention_scratch(size_t n) { return attention_scratch_.get<float>(n, stream_); }
  double* loss_scratch(size_t n) { return loss_scratch_.get<double>(n, stream_); }
  float* column_scratch(size_t n) { return column_scratch_.get<float>(n, stream_); }
  void* sort_scratch(size_t bytes) { return sort_scratch_.get(bytes, stream_); }
  void* adamw_table(size_t bytes) { return adamw_table_.get(bytes, stream_); }
  // Changes whenever any scratch above moved: a step graph recorded before uses freed memory.
  uint64_t scratch_moves() const {
    return attention_scratch_.moves() + loss_scratch_.moves() + column_scratch_.moves() +
           sort_scratch_.moves() + adamw_table_.moves();
  }

  // cuDNN's attention on the compute stream, made on the first call unless RM_CUDNN_ATTENTION=0
  // turns it off (cudnn_sdpa.h: cudnn_attention_mode(), whose std::invalid_argument for a bad
  // value propagates); null when not asked for, in a build without cuDNN, or when cuDNN cannot
  // be loaded (said once: the flash kernels run instead).
  CudnnAttention* cudnn_attention();

  // Copies `bytes` (at most kStagingBytes) at device address src into host_dst once the work
  // queued on the compute stream is done; returns when the bytes are there.
  static constexpr size_t kStagingBytes = 64;
  void fetch(void* host_dst, const void* src, size_t bytes);

 private:
  void release() noexcept;

  int device_;
  std::FILE* notes_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;
  cudaEvent_t queued_ = nullptr;
  SideStream bias_side_;
  Blas blas_;
  std::unique_ptr<LtGemm> lt_;
  std::unique_ptr<CudnnAttention> cudnn_attention_;
  bool cudnn_attention_tried_ = false;
  DeviceResults* results_ = nullptr;
  void* staging_ = nullptr;  // pinned, kStagingBytes
  // cuBLAS's workspace (cublasSetWorkspace), as cuBLASLt's (lt_gemm.h): NVIDIA's advice for Hopper.
  static constexpr size_t kBlasWorkspaceBytes = 32u << 20;
  void* blas_workspace_ = nullptr;
  DeviceScratch attention_scratch_;
  DeviceScratch loss_scratch_;
  DeviceScratch column_scratch_;  // column sums' partials (column_sums.cuh)
  DeviceScratch adamw_table_;     // adamw_update_ranges' chunks (CudaCompute keeps them current)
  DeviceScratch sort_scratch_;    // embedding_backward's token sort
};

}  // namespace rm::cuda

#include "kernels/cuda/cuda_context.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cuda_check.h"
#if RM_HAVE_CUDNN
#include "kernels/cuda/cudnn_library.h"
#include "kernels/cuda/cudnn_sdpa.h"
#else
namespace rm::cuda {
class CudnnAttention {};  // never made: cudnn_attention() is null without cuDNN
}  // namespace rm::cuda
#endif

namespace rm::cuda {
namespace {

// Destructor-path checks: report and go on (a destructor must not throw).
void report(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) std::fprintf(stderr, "rm::cuda: %s: %s\n", call, cudaGetErrorString(rc));
}

// Construction errors name the device.
struct DeviceError {
  int device;
  [[noreturn]] void operator()(const char* call, const char* error) const {
    throw std::runtime_error("cuda device " + std::to_string(device) + ": " + call +
                             " failed: " + error);
  }
};

}  // namespace

CudaContext::CudaContext(int device, bool allow_tf32, std::FILE* notes)
    : device_(device), notes_(notes) {
  const DeviceError on_error{device};
  try {
    RM_CUDA_CHECK(cudaSetDevice(device), on_error);
    // Non-blocking: no implicit ordering with the legacy default stream, which nothing here uses.
    RM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), on_error);
    RM_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking), on_error);
    RM_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming), on_error);
    const char* bias_stream = std::getenv("RM_CUDA_BIAS_STREAM");
    if (bias_stream == nullptr || std::string(bias_stream) != "0") {
      RM_CUDA_CHECK(cudaEventCreateWithFlags(&bias_side_.fork, cudaEventDisableTiming), on_error);
      RM_CUDA_CHECK(cudaEventCreateWithFlags(&bias_side_.join, cudaEventDisableTiming), on_error);
      RM_CUDA_CHECK(cudaStreamCreateWithFlags(&bias_side_.stream, cudaStreamNonBlocking), on_error);
    }
    RM_CUBLAS_CHECK(cublas().create(&blas_.handle), on_error);
    RM_CUBLAS_CHECK(cublas().set_stream(blas_.handle, stream_), on_error);
    // A workspace of its own, made once: without one, cuBLAS (12.2 on) takes its workspace with
    // cudaMallocAsync as it runs, which a recorded step graph (worker/step_graph.h) would hold
    // as memory nodes. After set_stream, which resets it to the default.
    RM_CUDA_CHECK(cudaMalloc(&blas_workspace_, kBlasWorkspaceBytes), on_error);
    RM_CUBLAS_CHECK(cublas().set_workspace(blas_.handle, blas_workspace_, kBlasWorkspaceBytes),
                    on_error);
    blas_.allow_tf32 = allow_tf32;
    lt_ = std::make_unique<LtGemm>(stream_);
    void* results = nullptr;
    RM_CUDA_CHECK(cudaMalloc(&results, sizeof(DeviceResults)), on_error);
    results_ = static_cast<DeviceResults*>(results);
    // On our stream, so that the kernels that accumulate into it come after (a plain cudaMemset
    // goes to the legacy stream, unordered against a non-blocking one).
    RM_CUDA_CHECK(cudaMemsetAsync(results_, 0, sizeof(DeviceResults), stream_), on_error);
    RM_CUDA_CHECK(cudaMallocHost(&staging_, kStagingBytes), on_error);
  } catch (...) {
    release();
    throw;
  }
}

CudaContext::~CudaContext() {
  release();
}

void CudaContext::release() noexcept {
  if (stream_ != nullptr) report(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (side_stream_ != nullptr) report(cudaStreamSynchronize(side_stream_), "cudaStreamSynchronize");
  if (bias_side_.stream != nullptr) {
    report(cudaStreamSynchronize(bias_side_.stream), "cudaStreamSynchronize");
  }
  cudnn_attention_.reset();  // after the syncs above: frees its workspace and handle
  lt_.reset();  // waits for the compute stream before it frees its workspace
  if (staging_ != nullptr) report(cudaFreeHost(staging_), "cudaFreeHost");
  if (results_ != nullptr) report(cudaFree(results_), "cudaFree");
  if (blas_.handle != nullptr) {
    const cublasStatus_t rc = cublas().destroy(blas_.handle);
    if (rc != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "rm::cuda: cublasDestroy: %s\n", cublas().status_string(rc));
    }
  }
  // After the handle that used it (the streams were synchronised above).
  if (blas_workspace_ != nullptr) report(cudaFree(blas_workspace_), "cudaFree");
  if (queued_ != nullptr) report(cudaEventDestroy(queued_), "cudaEventDestroy");
  if (bias_side_.stream != nullptr) {
    report(cudaStreamDestroy(bias_side_.stream), "cudaStreamDestroy");
  }
  for (cudaEvent_t e : {bias_side_.fork, bias_side_.join}) {
    if (e != nullptr) report(cudaEventDestroy(e), "cudaEventDestroy");
  }
  if (side_stream_ != nullptr) report(cudaStreamDestroy(side_stream_), "cudaStreamDestroy");
  if (stream_ != nullptr) report(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  staging_ = nullptr;
  results_ = nullptr;
  blas_.handle = nullptr;
  blas_workspace_ = nullptr;
  queued_ = nullptr;
  bias_side_ = SideStream{};
  side_stream_ = nullptr;
  stream_ = nullptr;
}

CudnnAttention* CudaContext::cudnn_attention() {
  if (cudnn_attention_tried_) return cudnn_attention_.get();
#if RM_HAVE_CUDNN
  const int mode = cudnn_attention_mode();  // a bad value throws, every call, until fixed
  cudnn_attention_tried_ = true;
  if (mode == 0) return nullptr;
  // What runs is said on notes_ (stdout in a rank: rank 0's console, every rank's log); a
  // fallback from what RM_CUDNN_ATTENTION asked for explicitly on stderr (cudnn_sdpa.h).
  const bool asked = cudnn_attention_asked();
  try {
    cudnn_attention_ = std::make_unique<CudnnAttention>(stream_, mode == 1, asked, notes_);
    std::fprintf(notes_, "ringmaster: attention through cuDNN %zu (%s; RM_CUDNN_ATTENTION=%s)\n",
                 cudnn().get_version(), mode == 1 ? "deterministic backward" : "dQ accumulated",
                 asked ? std::to_string(mode).c_str() : "0 runs the flash kernels");
    std::fflush(notes_);
  } catch (const std::runtime_error& e) {
    std::FILE* const to = asked ? stderr : notes_;
    std::fprintf(to,
                 "ringmaster: cuDNN's attention is unavailable (%s); attention runs the flash "
                 "kernels\n",
                 e.what());
    std::fflush(to);
  }
#else
  cudnn_attention_tried_ = true;
  if (const char* v = std::getenv("RM_CUDNN_ATTENTION");
      v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0) {
    std::fprintf(stderr,
                 "ringmaster: RM_CUDNN_ATTENTION is set but this build has no cuDNN; "
                 "attention runs the flash kernels\n");
  }
#endif
  return cudnn_attention_.get();
}

void CudaContext::fetch(void* host_dst, const void* src, size_t bytes) {
  if (bytes > kStagingBytes) throw std::invalid_argument("rm::cuda fetch: too many bytes");
  RM_CUDA_CHECK(cudaMemcpyAsync(staging_, src, bytes, cudaMemcpyDeviceToHost, stream_), kThrow);
  RM_CUDA_CHECK(cudaStreamSynchronize(stream_), kThrow);
  std::memcpy(host_dst, staging_, bytes);
}

}  // namespace rm::cuda

#include "kernels/cuda/cuda_compute.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_layers.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/upload_ring.h"

namespace rm::cuda {
namespace {

class CudaCompute final : public Compute {
 public:
  CudaCompute(int device, bool allow_tf32, std::FILE* notes)
      : ctx_(device, allow_tf32, notes), f32_(ctx_), bf16_(ctx_) {
    cudaDeviceProp prop;
    RM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), kThrow);
    const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
    description_ = "cuda:" + std::to_string(device) + " " + prop.name + " (sm_" +
                   std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                   std::to_string(std::llround(gib)) + " GiB)";
  }

  ~CudaCompute() override {
    // No throwing here: failures only leak the graph.
    if (capturing_) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(ctx_.stream(), &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
    if (graph_ != nullptr) {
      cudaStreamSynchronize(ctx_.stream());
      cudaGraphExecDestroy(graph_);
    }
  }

  ComputeKind kind() const override { return ComputeKind::kCuda; }
  std::string describe() const override { return description_; }
  void* stream() const override { return ctx_.stream(); }
  double device_memory_used() const override {
    size_t free = 0, total = 0;
    RM_CUDA_CHECK(cudaMemGetInfo(&free, &total), kThrow);
    return static_cast<double>(total - free);
  }

  // ---- Step graphs -------------------------------------------------------------------------
  bool can_capture() const override { return true; }
  void begin_capture() override {
    if (capturing_) throw std::logic_error("rm::cuda: begin_capture while recording");
    drop_graph();
    // Thread-local: a call of this thread that is not allowed while recording (a synchronize,
    // an allocation) fails at once instead of corrupting the graph; other threads (checkpoint
    // writers waiting on their download fences) are not affected.
    RM_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal), kThrow);
    capturing_ = true;
    graph_serial_ = next_serial_;  // what is allocated from now on cannot be in the graph
  }
  void end_capture(bool keep) override {
    if (!capturing_) throw std::logic_error("rm::cuda: end_capture without begin_capture");
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    const cudaError_t rc = cudaStreamEndCapture(ctx_.stream(), &graph);
    if (!keep || rc != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      // A failed recording leaves its error behind; cleared before it is thrown, so that the
      // step the trainer then runs call by call (worker/trainer.cc) does not find it.
      (void)cudaGetLastError();
      if (keep) RM_CUDA_CHECK(rc, kThrow);
      return;
    }
    const cudaError_t made = cudaGraphInstantiate(&graph_, graph, 0);
    cudaGraphDestroy(graph);  // the executable graph is independent of it
    if (made != cudaSuccess) {
      graph_ = nullptr;
      (void)cudaGetLastError();
    }
    RM_CUDA_CHECK(made, kThrow);
    graph_moves_ = ctx_.scratch_moves();
  }
  bool has_graph() override {
    if (graph_ != nullptr && graph_moves_ != ctx_.scratch_moves()) drop_graph();
    return graph_ != nullptr;
  }
  void replay() override {
    if (!has_graph()) throw std::logic_error("rm::cuda: replay without a current step graph");
    const cudaError_t rc = cudaGraphLaunch(graph_, ctx_.stream());
    if (rc != cudaSuccess) {
      // A graph that cannot launch is dropped, not kept: the trainer runs the step call by call
      // and records no more, and has_graph() must not send the next step back to it.
      cudaGraphExecDestroy(graph_);  // a launch that failed left nothing of it running
      graph_ = nullptr;
      kThrow("cudaGraphLaunch", cudaGetErrorString(rc));
    }
  }

  // ---- Memory ------------------------------------------------------------------------------
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    RM_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes), kThrow);  // 256-byte aligned
    serial_of_[p] = next_serial_++;
    if (bytes > 0) RM_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx_.stream()), kThrow);
    return p;
  }
  void release(void* memory) override {
    if (memory == nullptr) return;
    // Work queued on either stream may still use the memory.
    wait_all();
    forget(memory);
    RM_CUDA_CHECK(cudaFree(memory), kThrow);
  }
  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    RM_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), kThrow);
    serial_of_[p] = next_serial_++;
    std::memset(p, 0, bytes);
    return p;
  }
  void release_host(void* memory) override {
    if (memory == nullptr) return;
    wait_all();  // a download into it may be in flight
    forget(memory);
    RM_CUDA_CHECK(cudaFreeHost(memory), kThrow);
  }
  void upload(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return;
    if (capturing_) {
      // Recorded: the graph reads host_src each time it runs (compute.h), so it must be pinned.
      cudaPointerAttributes attr;
      RM_CUDA_CHECK(cudaPointerGetAttributes(&attr, host_src), kThrow);
      if (attr.type != cudaMemoryTypeHost) {
        throw std::logic_error("rm::cuda: a recorded upload must read allocate_host memory");
      }
      RM_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx_.stream()),
                    kThrow);
      return;
    }
    if (UploadRing::fits(bytes)) {  // token ids: no wait for the device (upload_ring.h)
      uploads_.upload(dst, host_src, bytes, ctx_.stream());
      return;
    }
    RM_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx_.stream()),
                  kThrow);
    // From pageable memory the call returns once host_src has been staged; from pinned memory
    // the copy is asynchronous, so wait for it: host_src may be reused when upload returns.
    cudaPointerAttributes attr;
    RM_CUDA_CHECK(cudaPointerGetAttributes(&attr, host_src), kThrow);
    if (attr.type == cudaMemoryTypeHost) synchronize();
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    RM_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream()),
                  kThrow);
    synchronize();
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return;
    RM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()),
                  kThrow);
  }
  void zero(void* dst, size_t bytes) override {
    if (bytes == 0) return;
    RM_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, ctx_.stream()), kThrow);
  }
  void download_async(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    // The side stream starts after everything queued so far on the compute stream.
    RM_CUDA_CHECK(cudaEventRecord(ctx_.queued_event(), ctx_.stream()), kThrow);
    RM_CUDA_CHECK(cudaStreamWaitEvent(ctx_.side_stream(), ctx_.queued_event(), 0), kThrow);
    RM_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.side_stream()),
                  kThrow);
  }
  std::function<void()> downloads_fence() override {
    // An event of its own, recorded after the downloads queued so far on the side stream, so
    // that later downloads do not move it; destroyed with the last copy of the function.
    struct Fence {
      int device = 0;
      cudaEvent_t event = nullptr;
      ~Fence() {
        if (event != nullptr) cudaEventDestroy(event);
      }
    };
    auto fence = std::make_shared<Fence>();
    fence->device = ctx_.device();
    RM_CUDA_CHECK(cudaEventCreateWithFlags(&fence->event, cudaEventDisableTiming), kThrow);
    RM_CUDA_CHECK(cudaEventRecord(fence->event, ctx_.side_stream()), kThrow);
    return [fence] {
      // The calling thread may have another current device (or none yet).
      RM_CUDA_CHECK(cudaSetDevice(fence->device), kThrow);
      RM_CUDA_CHECK(cudaEventSynchronize(fence->event), kThrow);
    };
  }
  void synchronize() override { RM_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()), kThrow); }

  LayerKernels<float>& layers_f32() override { return f32_; }
  LayerKernels<bf16>& layers_bf16() override { return bf16_; }

  // ---- GEMM, optimizer, reductions, casts ----------------------------------------------------
  void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) override {
    RowMajorGemm g;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.M = M, g.N = N, g.K = K;
    g.alpha = alpha, g.beta = beta;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    gemm(ctx_.blas(), g, A, B, C);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t,
                    float grad_scale) override {
    cuda::adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale,
                       ctx_.stream());
  }
  void adamw_update_ranges(float* params, const float* grads, float* m, float* v,
                           const std::vector<AdamWRange>& ranges, float lr, float beta1,
                           float beta2, float eps, float weight_decay, int64_t t, float grad_scale,
                           bf16* rounded = nullptr, const AdamWGuard* guard = nullptr) override {
    // The chunk table lives on the device and is built and uploaded only when the ranges change
    // (the optimizer's are the same every step): the first step waits for the stream once, so
    // that no queued launch still reads a table being replaced; later steps only launch.
    if (table_ == nullptr || ranges != table_ranges_) {
      const std::vector<AdamWChunk> chunks = adamw_chunks(ranges);
      const size_t bytes = chunks.size() * sizeof(AdamWChunk);
      RM_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()), kThrow);
      table_ = ctx_.adamw_table(bytes);
      // In stream order: cudaMemcpy from pageable memory returns once the bytes are staged,
      // its DMA perhaps still under way on the legacy stream, which nothing orders against
      // the AdamW launch on our non-blocking stream. The async copy stages them before it
      // returns too (so `chunks` may go) and lands before the launch.
      RM_CUDA_CHECK(
          cudaMemcpyAsync(table_, chunks.data(), bytes, cudaMemcpyHostToDevice, ctx_.stream()),
          kThrow);
      table_chunks_ = chunks.size();
      table_ranges_ = ranges;
    }
    cuda::adamw_update_chunks(params, grads, m, v, rounded, static_cast<const AdamWChunk*>(table_),
                              table_chunks_, lr, beta1, beta2, eps, weight_decay, t, grad_scale,
                              guard != nullptr ? *guard : AdamWGuard{}, ctx_.stream());
  }
  double sum_squares(const float* x, size_t n) override {
    DeviceResults* r = ctx_.results();
    cuda::sum_squares(&r->sum, r->partials, x, n, ctx_.stream());
    double total = 0.0;
    ctx_.fetch(&total, &r->sum, sizeof(total));
    return total;
  }
  void sum_squares_into(double* dst, const float* x, size_t n) override {
    cuda::sum_squares(dst, ctx_.results()->partials, x, n, ctx_.stream());
  }
  void add_inplace(float* acc, const float* x, size_t n) override {
    cuda::add_inplace(acc, x, n, ctx_.stream());
  }
  void add_inplace(float* acc, const bf16* x, size_t n) override {
    cuda::add_inplace(acc, x, n, ctx_.stream());
  }
  void scale(float* x, size_t n, float s) override { cuda::scale(x, n, s, ctx_.stream()); }
  void cast(bf16* dst, const float* src, size_t n) override {
    cuda::cast(dst, src, n, ctx_.stream());
  }
  void cast(float* dst, const bf16* src, size_t n) override {
    cuda::cast(dst, src, n, ctx_.stream());
  }

 private:
  void wait_all() {
    synchronize();
    RM_CUDA_CHECK(cudaStreamSynchronize(ctx_.side_stream()), kThrow);  // the downloads
  }
  // Memory about to be freed: the graph goes with it if it may use it (allocated before the
  // recording), or a replay would read and write freed memory -- the token slots of a
  // StepGraph destroyed with its Trainer, say. Memory allocated since cannot be in it
  // (nothing allocates while recording): a checkpoint's staging buffers keep the graph.
  void forget(void* memory) {
    const auto it = serial_of_.find(memory);
    if (it == serial_of_.end()) return;
    if (it->second < graph_serial_) drop_graph();
    serial_of_.erase(it);
  }
  void drop_graph() {
    if (graph_ == nullptr) return;
    synchronize();  // a replay may still run
    RM_CUDA_CHECK(cudaGraphExecDestroy(graph_), kThrow);
    graph_ = nullptr;
  }

  CudaContext ctx_;
  UploadRing uploads_;  // after ctx_: destroyed before it
  bool capturing_ = false;
  cudaGraphExec_t graph_ = nullptr;       // the recorded step, ready to launch
  uint64_t graph_moves_ = 0;              // ctx_.scratch_moves() when it was recorded
  uint64_t next_serial_ = 1;              // allocate()'s and allocate_host()'s count,
  uint64_t graph_serial_ = 0;             // its value when the graph was recorded,
  std::unordered_map<void*, uint64_t> serial_of_;  // and each live allocation's number
  void* table_ = nullptr;                 // adamw_update_ranges' chunk table on the device,
  size_t table_chunks_ = 0;               // its length,
  std::vector<AdamWRange> table_ranges_;  // and the ranges it was built from
  CudaLayers<float> f32_;
  CudaLayers<bf16> bf16_;
  std::string description_;
};

}  // namespace

int visible_device_count(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    if (why != nullptr) {
      *why = std::string("no usable CUDA device: ") + cudaGetErrorString(rc) +
             " (is the NVIDIA driver installed and a GPU present?)";
    }
    return 0;
  }
  // (Callers that report this quote CUDA_VISIBLE_DEVICES themselves: worker/device_select.cc.)
  if (count == 0 && why != nullptr) *why = "the CUDA driver reports no GPU";
  return count;
}

size_t device_memory(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) return 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 0;
  return prop.totalGlobalMem;
}

std::string device_uuid(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "";
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const char byte : prop.uuid.bytes) {
    const auto b = static_cast<unsigned char>(byte);
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

std::unique_ptr<Compute> make_cuda_compute(int device, bool allow_tf32, std::FILE* notes) {
  std::string why;
  const int count = visible_device_count(&why);
  if (count == 0)
    throw std::runtime_error("cannot use cuda device " + std::to_string(device) + ": " + why);
  if (device < 0 || device >= count) {
    throw std::runtime_error("cannot use cuda device " + std::to_string(device) +
                             ": this process sees " + std::to_string(count) + " GPU" +
                             (count == 1 ? "" : "s"));
  }
  return std::make_unique<CudaCompute>(device, allow_tf32, notes);
}

}  // namespace rm::cuda

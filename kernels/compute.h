// The compute interface: everything the models, the optimizer and the sharded state do to
// numbers, behind one class with a backend per device kind (kernels/cpu/, kernels/cuda/), as
// the Communicator is for collectives. The worker never calls a backend directly.
//
// Contract, for every backend:
//  - Memory: a kernel's pointers are memory of its backend -- from allocate(), or views
//    (offsets) into it. That is host memory on the cpu backend and device memory on cuda. Host
//    pointers appear only in upload / download and as the scalar results. Flat buffers stay
//    flat: a parameter or gradient buffer is one allocation, and layers and shards see views.
//  - Ordering: calls run in call order on the backend's compute stream (cpu: now, on the
//    calling thread). Whatever returns a value to the host (download, sum_squares, the losses)
//    first waits for the work queued before it. Nothing on the step path synchronises
//    otherwise: a step's loss and gradient norm reach the host after its optimizer update was
//    queued (kernels/step_scalars.h).
//  - Storage types: parameters and activations are float or bf16 (LayerKernels<T>, the job's
//    parallel.precision); gradients of parameters, fp32 master weights and the Adam moments are
//    float. The element-wise math both backends run lives in RM_HOST_DEVICE functions
//    (kernels/elementwise_math.h, kernels/bf16.h), so the CPU tests cover the GPU's formulas.
//  - Threading: one thread owns a Compute and makes every call on it.
//  - Errors: bad arguments throw std::invalid_argument before anything is written; a failure
//    of the backend's library (CUDA, cuBLAS) throws std::runtime_error naming the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/layer_kernels.h"
#include "kernels/step_scalars.h"

namespace rm {

enum class ComputeKind { kCpu, kCuda };
const char* compute_kind_name(ComputeKind kind);  // "cpu", "cuda"

// One range of adamw_update_ranges.
struct AdamWRange {
  size_t offset = 0;
  size_t n = 0;
  bool decay = false;  // weight decay applies (weights), or not (biases, norms)
  bool operator==(const AdamWRange& o) const {
    return offset == o.offset && n == o.n && decay == o.decay;
  }
};

class Compute {
 public:
  virtual ~Compute() = default;
  Compute(const Compute&) = delete;
  Compute& operator=(const Compute&) = delete;

  virtual ComputeKind kind() const = 0;
  // One line for the start-up banner: "cpu, 2 threads", "cuda:0 NVIDIA H100 (sm_90, 80 GiB)".
  virtual std::string describe() const = 0;
  // The cudaStream_t the kernels run on (nullptr on the cpu): communicators order their
  // operations after the work queued on it.
  virtual void* stream() const { return nullptr; }
  // Whether the host may read and write this backend's memory directly (cpu), so that staging
  // copies can be skipped.
  bool host_accessible() const { return kind() == ComputeKind::kCpu; }

  // ---- Memory --------------------------------------------------------------------------------
  // Zero-filled memory of this backend (at least 256-byte aligned); release() frees it.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* memory) = 0;  // nullptr is ignored
  // Host memory for staging transfers (pinned on cuda, so downloads into it are asynchronous).
  virtual void* allocate_host(size_t bytes) = 0;
  virtual void release_host(void* memory) = 0;
  // host -> backend, in stream order; host_src may be reused as soon as this returns.
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  // backend -> host; returns once the bytes are in host_dst.
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // within the backend
  virtual void zero(void* dst, size_t bytes) = 0;
  // A download that does not hold the compute stream (checkpoints): copies `src` as it is after
  // the work queued so far into host_dst (from allocate_host), on a side stream, while compute
  // goes on. The data is in host_dst once a fence taken after it (below) has returned; until
  // then neither buffer may be written.
  virtual void download_async(void* host_dst, const void* src, size_t bytes) = 0;
  // The wait for the downloads queued so far, as a function that ANY thread may call (once or
  // more): a checkpoint writer's thread runs it, so that the owning thread goes on queueing
  // compute while the bytes cross the bus. It throws std::runtime_error on a device
  // failure. It must not be called after the Compute is destroyed. cpu: a no-op (done already).
  virtual std::function<void()> downloads_fence() = 0;
  // Waits for everything queued on the compute stream.
  virtual void synchronize() = 0;
  // Bytes of the device's memory in use by all processes (cuda: cudaMemGetInfo's total - free,
  // so the CUDA context and library workspaces count); 0 on the cpu (see the process's RSS).
  virtual double device_memory_used() const { return 0; }

  // ---- Step graphs ---------------------------------------------------------------------------
  // A part of a training step recorded once and replayed (cuda: a CUDA graph, one launch for
  // the ~200 of a GPT-2 step's forward and backward, with no host between them). Between
  // begin_capture and end_capture calls are recorded, not run: nothing may wait for the device
  // or allocate (the step path's contract already), and an upload records a copy from its host
  // source that is read when the graph runs -- so the source must be allocate_host memory that
  // stays valid and holds the new bytes before each replay. A replay runs the recorded calls
  // with their recorded pointers and arguments. has_graph() turns false (the graph is dropped)
  // when memory the graph uses was reallocated since (cuda: grow-only scratch that grew) or
  // released (release/release_host of memory allocated before the recording), so that the
  // caller records again. cpu: no graphs (can_capture false; the rest throws).
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() { throw std::logic_error("this compute backend records no graphs"); }
  // Ends the recording; the graph is kept for replay. Also the way out of a failed recording
  // (`keep` false, as from an exception between the two): the recording is discarded.
  virtual void end_capture(bool keep) {
    (void)keep;
    throw std::logic_error("this compute backend records no graphs");
  }
  virtual bool has_graph() { return false; }
  virtual void replay() { throw std::logic_error("this compute backend records no graphs"); }

  // ---- Layers --------------------------------------------------------------------------------
  virtual LayerKernels<float>& layers_f32() = 0;
  virtual LayerKernels<bf16>& layers_bf16() = 0;
  template <typename T>
  LayerKernels<T>& layers();

  // ---- GEMM, optimizer, reductions, casts (float) --------------------------------------------
  // C[M,N] = alpha op(A) op(B) + beta C, row-major, leading dimensions are row strides (as
  // cpu::sgemm). cuda: cuBLAS, TF32 tensor cores when allow_tf32 was set.
  virtual void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                     int lda, const float* B, int ldb, float beta, float* C, int ldc) = 0;
  // AdamW over n elements (kernels/cpu/adamw.h), t the 1-based step.
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                            float lr, float beta1, float beta2, float eps, float weight_decay,
                            int64_t t, float grad_scale) = 0;
  // AdamW over several ranges of the same buffers in one call: range r covers elements
  // [r.offset, r.offset + r.n) of params, grads, m and v, with weight_decay where r.decay is set
  // and 0 elsewhere (biases, norms). The optimizer's whole shard in one call: one launch on cuda,
  // where one launch per tensor (148 for GPT-2, most of a few thousand elements) was bound by
  // launch latency. By default adamw_update per range, in order (the same bits); cuda's single
  // kernel computes the same element update, to an ulp (see AdamWRangesMatchOneCallPerRange).
  // `rounded` (may be null): also rounded[r.offset + i] = the bf16 rounding of the updated
  // params[r.offset + i], bit for bit what cast() writes, so that mixed precision's compute copy
  // is refreshed without a second pass over the masters (cuda: in the same kernel; by default
  // a cast per range after its update). Elements outside the ranges are left as they are.
  // `guard` (may be null): a training step's scalars in this backend's memory decide, where the
  // update runs, without the host (kernels/step_scalars.h): nothing is written unless
  // step_is_applied(*guard.scalars, guard.limits), and grad_scale is multiplied by
  // clip_factor(step_grad_norm(...), guard.max_norm). The default reads them directly, so it
  // serves backends whose memory the host addresses (cpu).
  virtual void adamw_update_ranges(float* params, const float* grads, float* m, float* v,
                                   const std::vector<AdamWRange>& ranges, float lr, float beta1,
                                   float beta2, float eps, float weight_decay, int64_t t,
                                   float grad_scale, bf16* rounded = nullptr,
                                   const AdamWGuard* guard = nullptr) {
    if (guard != nullptr) {
      if (!step_is_applied(*guard->scalars, guard->limits)) return;
      grad_scale *= clip_factor(step_grad_norm(*guard->scalars), guard->max_norm);
    }
    for (const AdamWRange& r : ranges) {
      adamw_update(params + r.offset, grads + r.offset, m + r.offset, v + r.offset, r.n, lr,
                   beta1, beta2, eps, r.decay ? weight_decay : 0.0f, t, grad_scale);
      if (rounded != nullptr) cast(rounded + r.offset, params + r.offset, r.n);
    }
  }
  // sum_i x[i]^2 in double, returned to the host.
  virtual double sum_squares(const float* x, size_t n) = 0;
  // The same sum into *dst, memory of this backend, in stream order: no host wait. By default
  // sum_squares then an upload (which waits: backends override it).
  virtual void sum_squares_into(double* dst, const float* x, size_t n) {
    const double total = sum_squares(x, n);
    upload(dst, &total, sizeof(total));
  }
  virtual void add_inplace(float* acc, const float* x, size_t n) = 0;  // acc += x
  virtual void add_inplace(float* acc, const bf16* x, size_t n) = 0;   // acc += widen(x)
  virtual void scale(float* x, size_t n, float s) = 0;                 // x *= s
  // Round to bf16 (nearest even) and widen back (exact).
  virtual void cast(bf16* dst, const float* src, size_t n) = 0;
  virtual void cast(float* dst, const bf16* src, size_t n) = 0;

 protected:
  Compute() = default;
};

template <>
inline LayerKernels<float>& Compute::layers<float>() {
  return layers_f32();
}
template <>
inline LayerKernels<bf16>& Compute::layers<bf16>() {
  return layers_bf16();
}

// n elements of T in memory of a Compute, released with it. Move-only.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Compute& compute, size_t n)
      : compute_(&compute), ptr_(static_cast<T*>(compute.allocate(n * sizeof(T)))), n_(n) {}
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(compute_, o.compute_);
      std::swap(ptr_, o.ptr_);
      std::swap(n_, o.n_);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return ptr_; }
  size_t size() const { return n_; }
  void reset() {
    if (compute_ != nullptr) compute_->release(ptr_);
    compute_ = nullptr;
    ptr_ = nullptr;
    n_ = 0;
  }

 private:
  Compute* compute_ = nullptr;
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

}  // namespace rm

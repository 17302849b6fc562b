// A Compute that passes for a device backend and checks the stream-ordering contract of
// kernels/compute.h: the real cpu Compute does the arithmetic, and every call that touches
// memory first reports its ranges to an OrderLedger (testing/order_ledger.h), which records each
// race with a collective in flight or a download not yet fenced.
//
//  - kind() is kCuda, so host_accessible() is false: ShardedState stages checkpoints through
//    allocate_host + download_async + downloads_fence and initialises through upload, as on a
//    GPU. Use it with ShardedState, the optimizer and the models' memory planning only, not
//    with code that picks or opens a device by kind (worker/device_select.h).
//  - download_async copies nothing when called: the copy happens when a fence taken after it
//    runs (downloads_fence()'s function, from any thread), from the source as it is then.
//    release() and release_host() fence first, as the cuda backend's do.
//  - The layer kernels (layers_f32 / layers_bf16) are the cpu ones, unchecked: the ordering
//    tests drive ShardedState directly and run no forward or backward.
//  - Memory from allocate / allocate_host is named in the ledger ("compute.allocate#3",
//    "allocate_host#1") so that violations say which buffer.
//
// One thread makes every call (kernels/compute.h); the fences may run on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/compute.h"
#include "testing/order_ledger.h"

namespace rm {

class OrderCheckingCompute final : public Compute {
 public:
  // `inner` (a cpu Compute) does the work; it and the ledger must outlive this object and every
  // fence it hands out.
  OrderCheckingCompute(Compute& inner, OrderLedger& ledger) : inner_(inner), ledger_(ledger) {}

  ComputeKind kind() const override { return ComputeKind::kCuda; }
  std::string describe() const override { return "order-checking " + inner_.describe(); }

  void* allocate(size_t bytes) override;
  void release(void* memory) override;
  void* allocate_host(size_t bytes) override;
  void release_host(void* memory) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void download_async(void* host_dst, const void* src, size_t bytes) override;
  std::function<void()> downloads_fence() override;
  void synchronize() override { inner_.synchronize(); }

  LayerKernels<float>& layers_f32() override { return inner_.layers_f32(); }
  LayerKernels<bf16>& layers_bf16() override { return inner_.layers_bf16(); }

  void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t,
                    float grad_scale) override;
  double sum_squares(const float* x, size_t n) override;
  void sum_squares_into(double* dst, const float* x, size_t n) override;
  // Reads the guard's scalars (kernels/step_scalars.h), then the default.
  void adamw_update_ranges(float* params, const float* grads, float* m, float* v,
                           const std::vector<AdamWRange>& ranges, float lr, float beta1,
                           float beta2, float eps, float weight_decay, int64_t t, float grad_scale,
                           bf16* rounded = nullptr, const AdamWGuard* guard = nullptr) override;
  void add_inplace(float* acc, const float* x, size_t n) override;
  void add_inplace(float* acc, const bf16* x, size_t n) override;
  void scale(float* x, size_t n, float s) override;
  void cast(bf16* dst, const float* src, size_t n) override;
  void cast(float* dst, const bf16* src, size_t n) override;

 private:
  void read(const char* call, const void* p, size_t bytes) {
    ledger_.device_access(call, p, bytes, OrderLedger::Access::kRead);
  }
  void write(const char* call, const void* p, size_t bytes) {
    ledger_.device_access(call, p, bytes, OrderLedger::Access::kWrite);
  }
  void* named(void* p, size_t bytes, const char* kind, int& count);  // names it in the ledger
  void forget(const char* call, void* memory);                       // before freeing it
  // An element-wise kernel: n elements of src read, n of dst written.
  template <typename D, typename S>
  void elementwise(const char* call, D* dst, const S* src, size_t n) {
    read(call, src, n * sizeof(S));
    write(call, dst, n * sizeof(D));
  }

  Compute& inner_;
  OrderLedger& ledger_;
  int allocations_ = 0, host_allocations_ = 0;
};

}  // namespace rm

// A Compute that passes every call to another and, while enabled, times each one: the call is
// bracketed by synchronize(), so its time is its own -- the device's work plus the launch -- and
// added to a total per operation and shape ("linear_forward 16384x768->2304"). It also counts
// calls, allocations and the calls that return a value to the host (download, sum_squares, the
// losses: each one is a host synchronisation on a device backend).
//
// For finding what dominates a step (`bench train --profile`), not for speed: the brackets
// remove all overlap of launching and executing, so a profiled step is slower than a real one
// by roughly the launches' cost. Disabled, it only counts (a virtual call more per call).
// One thread makes every call (kernels/compute.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/compute.h"

namespace rm {

class TimedCompute final : public Compute {
 public:
  struct Op {
    std::string name;
    int64_t calls = 0;
    double seconds = 0;
  };
  struct Counts {
    int64_t calls = 0;        // every kernel / GEMM / memory operation through this Compute
    int64_t allocations = 0;  // allocate() calls
    int64_t host_syncs = 0;   // calls that return a value to the host or wait for the device
    size_t largest_allocation = 0;  // bytes
  };

  explicit TimedCompute(Compute& inner);
  ~TimedCompute() override;

  void set_timing(bool on) { timing_ = on; }
  // While on, every call is also appended to log(), in call order (the step tests read where
  // the host synchronisations fall).
  struct Call {
    std::string name;
    bool host_sync = false;
  };
  void set_logging(bool on) { logging_ = on; }
  const std::vector<Call>& log() const { return log_; }
  // The timed operations since the last reset (which also clears the log), the slowest first.
  std::vector<Op> ops() const;
  const Counts& counts() const { return counts_; }
  void reset();

  ComputeKind kind() const override { return inner_.kind(); }
  std::string describe() const override { return inner_.describe(); }
  void* stream() const override { return inner_.stream(); }
  double device_memory_used() const override { return inner_.device_memory_used(); }

  void* allocate(size_t bytes) override;
  void release(void* memory) override { inner_.release(memory); }
  void* allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void release_host(void* memory) override { inner_.release_host(memory); }
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void download_async(void* host_dst, const void* src, size_t bytes) override;
  std::function<void()> downloads_fence() override { return inner_.downloads_fence(); }
  void synchronize() override;

  // Step graphs pass through, but not while timing: its synchronize brackets cannot be
  // recorded, and a timed step replaying its graph would time one call, not the step's kernels,
  // so while timing there is no graph to replay (the inner one is kept for after). Untimed, a
  // replay counts as one call.
  bool can_capture() const override { return !timing_ && inner_.can_capture(); }
  void begin_capture() override { inner_.begin_capture(); }
  void end_capture(bool keep) override { inner_.end_capture(keep); }
  bool has_graph() override { return !timing_ && inner_.has_graph(); }
  void replay() override;

  LayerKernels<float>& layers_f32() override;
  LayerKernels<bf16>& layers_bf16() override;

  void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t,
                    float grad_scale) override;
  void adamw_update_ranges(float* params, const float* grads, float* m, float* v,
                           const std::vector<AdamWRange>& ranges, float lr, float beta1,
                           float beta2, float eps, float weight_decay, int64_t t, float grad_scale,
                           bf16* rounded = nullptr, const AdamWGuard* guard = nullptr) override;
  double sum_squares(const float* x, size_t n) override;
  void sum_squares_into(double* dst, const float* x, size_t n) override;
  void add_inplace(float* acc, const float* x, size_t n) override;
  void add_inplace(float* acc, const bf16* x, size_t n) override;
  void scale(float* x, size_t n, float s) override;
  void cast(bf16* dst, const float* src, size_t n) override;
  void cast(float* dst, const bf16* src, size_t n) override;

  // Times one call: counts it, and while timing is on synchronises before and after it and adds
  // the time to `name`'s total. host_sync: the call returns a value to the host. Used by the
  // layer wrappers too.
  template <typename F>
  auto timed(const std::string& name, bool host_sync, F&& call) -> decltype(call()) {
    ++counts_.calls;
    if (host_sync) ++counts_.host_syncs;
    if (logging_) log_.push_back({name, host_sync});
    if (!timing_) return call();
    inner_.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (std::is_void_v<decltype(call())>) {
      call();
      finish(name, t0);
    } else {
      auto result = call();
      finish(name, t0);
      return result;
    }
  }

 private:
  void finish(const std::string& name, std::chrono::steady_clock::time_point t0);

  Compute& inner_;
  bool timing_ = false;
  bool logging_ = false;
  std::vector<Call> log_;
  std::map<std::string, Op> ops_;
  Counts counts_;
  std::unique_ptr<LayerKernels<float>> f32_;
  std::unique_ptr<LayerKernels<bf16>> bf16_;
};

}  // namespace rm

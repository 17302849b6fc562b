// How a model reaches its parameters and gradient buffers, one unit at a time.
//
// A unit is a contiguous range [begin, end) of the flat parameter layout that is used together
// (the GPT's embeddings, each transformer block, the final norm). Models call acquire/release
// around each use, which lets the trainer decide where the memory lives:
//   - replicated and ZeRO-1: full buffers; acquire returns a pointer into them.
//   - ZeRO-2: gradients only for this rank's shard; acquire_grads hands out a unit-sized
//     scratch buffer and release_grads reduce-scatters it.
//   - ZeRO-3: parameters sharded too; acquire_params all-gathers the unit just before use.
//
// Contract:
// - Memory: pointers are memory of the model's compute backend (kernels/compute.h): host memory
//   on the cpu, device memory on cuda. Parameters are in the job's compute precision (float for
//   fp32 jobs, bf16 for bf16 jobs: the model casts the void pointer to its storage type);
//   gradients are always float.
// - The returned pointer addresses the unit's first element: tensor t of the unit is at
//   ptr + (t.offset - unit.begin). It stays valid until the matching release.
// - Gradients are ACCUMULATED into the acquired buffer (+=).
// - release_grads(u) means: this micro-batch's gradient of unit u is final. Models release
//   gradient units from the last unit to the first (reverse layer order).
// - One thread calls it; calls follow the model's program order, identical on every rank.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace rm {

struct ParamUnit {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  virtual const void* acquire_params(int unit) = 0;
  virtual void release_params(int unit) = 0;
  virtual float* acquire_grads(int unit) = 0;
  virtual void release_grads(int unit) = 0;
};

// Full float parameter and gradient buffers of one process (sampling, evaluation, tests). on_grads_ready(begin, end) is called from release_grads.
class FlatParamAccess final : public ParamAccess {
 public:
  using ReadyFn = std::function<void(size_t begin, size_t end)>;
  FlatParamAccess(const std::vector<ParamUnit>& units, const float* params, float* grads,
                  ReadyFn on_grads_ready = nullptr)
      : units_(units), params_(params), grads_(grads), ready_(std::move(on_grads_ready)) {}

  const void* acquire_params(int u) override { return params_ + units_[u].begin; }
  void release_params(int) override {}
  float* acquire_grads(int u) override { return grads_ + units_[u].begin; }
  void release_grads(int u) override {
    if (ready_) ready_(units_[u].begin, units_[u].end);
  }

 private:
  const std::vector<ParamUnit>& units_;
  const float* params_;
  float* grads_;
  ReadyFn ready_;
};

}  // namespace rm

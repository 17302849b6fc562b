// Where each named tensor of a model lives inside its flat parameter buffer.
//
// A model's parameters are one contiguous float buffer (gradients and optimizer moments are
// buffers of the same length and layout), so bucketed all-reduce, ZeRO shards and checkpoint
// shards are plain slices of it. Layers hold offsets into these buffers, never their own memory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rm {

// Where the compute's memory is not host-readable, the whole model is downloaded to the host
// (for weights.bin and the export) one piece of at most this many floats at a time (64 MiB),
// not in one copy of the model (worker/sharded_state.h: stream_params). The memory estimate
// counts the pinned buffer of that size (planning/memory_estimate.cc).
inline constexpr size_t kParamDownloadPiece = size_t{16} << 20;

struct TensorSpec {
  std::string name;            // e.g. "h.0.attn.qkv.weight"
  std::vector<int64_t> shape;  // row-major
  size_t offset = 0;           // in floats from the start of the flat buffer
  size_t numel = 0;
  bool decay = false;          // AdamW weight decay applies (matrices, not biases or norms)
};

class ParamLayout {
 public:
  // Appends a tensor after the previous one; returns its offset. Names must be unique.
  size_t add(const std::string& name, std::vector<int64_t> shape, bool decay);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  size_t size() const { return size_; }                  // total floats

 private:
  std::vector<TensorSpec> tensors_;
  size_t size_ = 0;
};

}  // namespace rm

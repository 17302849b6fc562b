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

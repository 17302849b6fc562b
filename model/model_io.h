// Moving a model's host inputs and outputs to and from its Compute: token ids up, one row of
// logits down (widened to float when the model stores bf16). Shared by the GPT and the MLP.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/compute.h"

namespace rm {

// Uploads n token ids to `inputs`, and n targets to `targets` when host_targets is not null.
inline void upload_tokens(Compute& compute, int* inputs, int* targets, const int* host_inputs,
                          const int* host_targets, size_t n) {
  compute.upload(inputs, host_inputs, n * sizeof(int));
  if (host_targets != nullptr) compute.upload(targets, host_targets, n * sizeof(int));
}

// A row of V logits of storage type T, fetched to the host as floats. The pointer stays valid
// until the next fetch.
template <typename T>
class HostLogits {
 public:
  const float* fetch(Compute& compute, const T* row, int V) {
    raw_.resize(V);
    out_.resize(V);
    compute.download(raw_.data(), row, static_cast<size_t>(V) * sizeof(T));
    for (int i = 0; i < V; ++i) out_[i] = load(raw_[i]);
    return out_.data();
  }

 private:
  std::vector<T> raw_;
  std::vector<float> out_;
};

}  // namespace rm

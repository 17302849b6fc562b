// An MLP next-token model (Bengio et al. 2003, makemore style): each position t of a sequence
// is predicted from the embeddings of the `mlp_context` tokens up to and including t,
// concatenated and fed through `layers` hidden layers of `width` units with GELU, then a linear
// layer to vocab_size logits. Positions with fewer than mlp_context earlier tokens in the
// sequence see zero vectors in place of the missing ones. Every position is a target, as in
// the GPT, so the two models train on the same batches and report comparable losses.
//
// Flat layout and units: emb (unit 0), fc.0 ... fc.{layers-1}, head (unit layers+1); backward
// releases gradients from the head down to the embedding.
#pragma once

#include <vector>

#include "kernels/device_arena.h"
#include "model/model.h"
#include "model/model_io.h"

namespace rm {

// T: the storage type of parameters and activations (float, or bf16 for mixed precision).
template <typename T = float>
class MlpModel final : public Model {
 public:
  MlpModel(const ModelConfig& config, int max_batch, Compute* compute = nullptr);

  using Model::forward_backward;
  using Model::forward_loss;
  using Model::next_token_logits;

  Precision precision() const override {
    return sizeof(T) == 2 ? Precision::kBf16 : Precision::kFp32;
  }
  const ParamLayout& layout() const override { return layout_; }
  const std::vector<ParamUnit>& units() const override { return units_; }
  std::string unit_name(int u) const override {
    return u == 0 ? "embedding" : u == L_ + 1 ? "head" : "fc." + std::to_string(u - 1);
  }
  using Model::init_params;
  void init_params(float* params, size_t begin, size_t end, uint64_t seed) const override;
  int max_batch() const override { return max_batch_; }
  int seq_len() const override { return T_; }
  int vocab_size() const override { return V_; }
  int targets_per_sample() const override { return T_; }

  // The MLP draws nothing (model.dropout is gpt's): key is unused.
  void queue_forward_backward(ParamAccess& access, const int* inputs, const int* targets, int B,
                              float grad_scale, const MicroBatchKey& key) override;
  double take_loss_sum() override { return k_.take_queued_loss(); }
  void queue_loss_copy(double* dst) override { k_.queue_loss_copy(dst); }
  double forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                      int B) override;
  const float* next_token_logits(ParamAccess& access, const int* context, int len) override;
  std::vector<GemmShape> train_gemms(int B) const override;
  size_t arena_bytes() const override { return memory_.bytes(); }

  // What a model of this shape needs (model.h), from the code that lays out and plans a live
  // one, without building it.
  static ModelFootprint footprint(const ModelConfig& config, int max_batch);
  // The flat parameter layout of a model of this shape, without building it.
  static ParamLayout param_layout(const ModelConfig& config) {
    return lay_out(config, config.layers).params;
  }

 private:
  template <typename M, typename... A>
  friend ModelFootprint footprint_from_layout(const ModelConfig& config, int max_batch,
                                              const A&... plan_args);
  struct Layer {  // unit 1 + index; w and b relative to the unit
    size_t w, b;
    int in, out;
  };
  // The flat layout of a model with `hidden` hidden layers.
  struct Layout {
    ParamLayout params;
    std::vector<ParamUnit> units;
    std::vector<Layer> layers;  // hidden layers then the head
  };
  static Layout lay_out(const ModelConfig& config, int hidden);
  // Every activation and the backward scratch: the arrays of one arena.
  struct Activations {
    int *inputs, *targets;
    T* x;                       // [rows, K*E] concatenated embeddings
    std::vector<T*> pre, post;  // per hidden layer: before / after GELU
    T *logits, *dx, *dh;
  };
  static void plan(DeviceArena& arena, Activations& x, const ModelConfig& config, int hidden,
                   int max_batch);
  // Forward over B sequences of Tn tokens (rows = B*Tn) of the uploaded inputs; logits end up
  // in a_.logits.
  void forward(ParamAccess& access, int B, int Tn);

  int V_, T_, K_, E_, W_, L_, max_batch_;  // K_ = context tokens per prediction
  ParamLayout layout_;
  std::vector<ParamUnit> units_;
  std::vector<Layer> layers_;  // hidden layers then the head
  LayerKernels<T>& k_;
  DeviceArena memory_;         // every activation and the backward scratch, planned once
  Activations a_;              // its arrays
  HostLogits<T> host_logits_;  // next_token_logits
};

extern template class MlpModel<float>;
extern template class MlpModel<bf16>;

}  // namespace rm

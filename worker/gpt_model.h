// A GPT-2 style decoder: token + position embedding, `layers` pre-LN blocks of causal
// multi-head self-attention and a GELU(tanh) MLP of width 4C, a final layernorm and an LM head
// tied to the token embedding. Initialisation follows GPT-2: weights N(0, 0.02), the two
// residual projections of each block N(0, 0.02 / sqrt(2 * layers)), biases 0, norms (1, 0).
//
// Flat layout (see ParamLayout): wte, wpe, h.0 ... h.{L-1}, ln_f. Backward finishes ln_f first,
// then the blocks from last to first, then the embeddings, so gradients become final from the
// end of the buffer towards its start: buckets of a suffix can be reduced while backward runs.
#pragma once

#include <vector>

#include "worker/model.h"

namespace rm {

class GptModel final : public Model {
 public:
  GptModel(const ModelConfig& config, int max_batch);

  const ParamLayout& layout() const override { return layout_; }
  void init_params(float* params, uint64_t seed) const override;
  int max_batch() const override { return max_batch_; }
  int seq_len() const override { return T_; }
  int vocab_size() const override { return V_; }
  int targets_per_sample() const override { return T_; }

  double forward_backward(const float* params, float* grads, const int* inputs,
                          const int* targets, int B, float grad_scale,
                          const GradReadyFn& on_grads_ready) override;
  double forward_loss(const float* params, const int* inputs, const int* targets,
                      int B) override;
  const float* next_token_logits(const float* params, const int* context, int len) override;
  std::vector<GemmShape> train_gemms(int B) const override;

 private:
  // Offsets of one block's tensors in the flat buffer.
  struct BlockOffsets {
    size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w,
        fcproj_b, begin, end;
  };
  // Activations of one block, kept for backward.
  struct BlockActs {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd,
        *fch, *fch_gelu, *res3;
  };

  // Runs the forward pass over B sequences of T tokens; leaves logits [B*T, V] in logits_.
  void forward(const float* p, const int* inputs, int B, int T);
  void backward(const float* p, float* g, const int* inputs, int B, const GradReadyFn& ready);

  int V_, T_, C_, H_, L_, max_batch_;
  ParamLayout layout_;
  size_t wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<BlockOffsets> blocks_;

  std::vector<float> act_memory_;  // every activation, planned once
  std::vector<BlockActs> acts_;
  float *encoded_, *lnf_, *lnf_mean_, *lnf_rstd_, *logits_, *branch_;
  // Backward scratch, reused by every block.
  std::vector<float> grad_memory_;
  float *dresidual_, *dln_, *datty_, *dqkv_, *dfch_, *dfch_gelu_, *datt_;
};

}  // namespace rm

// A GPT-2 style decoder: token + position embedding, `layers` pre-LN blocks of causal
// multi-head self-attention and a GELU(tanh) MLP of width 4C, a final layernorm and an LM head
// tied to the token embedding. Initialisation follows GPT-2: weights N(0, 0.02), the two
// residual projections of each block N(0, 0.02 / sqrt(2 * layers)), biases 0, norms (1, 0).
//
// Flat layout (see ParamLayout) and units (param_access.h): unit 0 = wte, wpe; unit 1+l =
// block h.l; unit L+1 = ln_f. Backward finishes ln_f first, then the blocks from last to
// first, then the embeddings, so gradients become final from the end of the buffer towards
// its start. The tied wte is used at both ends of the network: unit 0 stays acquired from the
// start of forward to the end of backward.
//
// With model.recompute (activation recomputation, as torch.utils.checkpoint per block or
// Megatron's full recompute), every block's activations share one set of arrays and only each
// block's output (the next block's input) is kept per block. Backward runs a block's forward
// again from its kept input, with the parameters it acquires for the block's backward anyway,
// just before the block's backward (the last block's activations are still there after
// forward). The kernels are deterministic, so the recomputed activations, and with them the
// loss and every gradient, are bit-identical to a run that kept them.
//
// With model.classifier_chunk_tokens the tied LM head and the loss take that many rows (tokens)
// at a time, in training, evaluation and sampling alike, so that the logits array holds a chunk
// of rows of V instead of all B x T of them: at GPT-2's vocabulary the logits are the largest
// activation (B x T x 50257) and the chunk bounds them. The embedding's gradient is accumulated
// chunk by chunk and the loss summed chunk by chunk, a different order of the same sums.
//
// With model.dropout p > 0, training drops elements at three kinds of site, as GPT-2's embd_pdrop
// and resid_pdrop do (and nanoGPT's `dropout` bar its attention dropout): the embeddings' sum
// (site 0) and each block's two branch outputs before they join the residual stream, the
// attention's projection (site 1 + 2l) and the MLP's (site 2 + 2l). The attention's
// probabilities are not dropped: the flash kernels never hold them. Masks are drawn, not
// stored (kernels/dropout_mask.h, keyed by the micro-batch's MicroBatchKey and the site): the
// backward, and a recomputed forward, draw them again. Evaluation and sampling drop nothing.
#pragma once

#include <vector>

#include "kernels/device_arena.h"
#include "model/model.h"
#include "model/model_io.h"

namespace rm {

// Rows (tokens) the gpt classifier takes at once for max_batch sequences: the config's
// classifier_chunk_tokens where it is set and below max_batch x seq_len, else all of them. The
// logits array holds this many rows of V.
size_t gpt_classifier_rows(const ModelConfig& config, int max_batch);

// T: the storage type of parameters and activations (float, or bf16 for mixed precision).
template <typename T = float>
class GptModel final : public Model {
 public:
  GptModel(const ModelConfig& config, int max_batch, Compute* compute = nullptr);

  using Model::forward_backward;
  using Model::forward_loss;
  using Model::next_token_logits;
  using Model::span_losses;

  Precision precision() const override {
    return sizeof(T) == 2 ? Precision::kBf16 : Precision::kFp32;
  }
  const ParamLayout& layout() const override { return layout_; }
  const std::vector<ParamUnit>& units() const override { return units_; }
  std::string unit_name(int u) const override {
    return u == 0              ? "embeddings"
           : u == final_unit() ? "final layernorm"
                               : "block " + std::to_string(u - 1);
  }
  using Model::init_params;
  void init_params(float* params, size_t begin, size_t end, uint64_t seed) const override;
  int max_batch() const override { return max_batch_; }
  int seq_len() const override { return T_; }
  int vocab_size() const override { return V_; }
  int targets_per_sample() const override { return T_; }

  void queue_forward_backward(ParamAccess& access, const int* inputs, const int* targets, int B,
                              float grad_scale, const MicroBatchKey& key) override;
  double take_loss_sum() override { return k_.take_queued_loss(); }
  void queue_loss_copy(double* dst) override { k_.queue_loss_copy(dst); }
  double forward_loss(ParamAccess& access, const int* inputs, const int* targets, int B) override;
  const float* next_token_logits(ParamAccess& access, const int* context, int len) override;
  std::vector<double> span_losses(ParamAccess& access, const int* inputs, const int* targets, int B,
                                  int len, const std::vector<TokenSpan>& spans) override;
  std::vector<GemmShape> train_gemms(int B) const override;
  size_t arena_bytes() const override { return memory_.bytes(); }
  // The arena's arrays, for the memory tests.
  const DeviceArena& activations() const { return memory_; }

  // What a model of this shape needs (model.h), from the code that lays out and plans a live
  // one, without building it: with the attention buffers and the classifier scratch of a
  // backend whose LayerKernels::attention_buffers(max_batch, seq_len, width, heads) is
  // `attention` and classifier_scratch_elements(gpt_classifier_rows(config, max_batch), width,
  // vocab_size) is `classifier`; by default the cpu backend's (materialised attention, logits
  // [rows, V]).
  static ModelFootprint footprint(const ModelConfig& config, int max_batch);
  static ModelFootprint footprint(const ModelConfig& config, int max_batch,
                                  const AttentionBuffers& attention, size_t classifier);
  // The flat parameter layout of a model of this shape, without building it.
  static ParamLayout param_layout(const ModelConfig& config) {
    return lay_out(config, config.layers).params;
  }

 private:
  template <typename M, typename... A>
  friend ModelFootprint footprint_from_layout(const ModelConfig& config, int max_batch,
                                              const A&... plan_args);
  // Offsets of one block's tensors from the start of its unit.
  struct BlockOffsets {
    size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
  };
  // The flat layout of a model with `blocks` blocks and where its tensors sit.
  struct Layout {
    ParamLayout params;
    std::vector<ParamUnit> units;
    size_t wte, wpe, lnf_w, lnf_b;  // wte, wpe from unit 0; lnf_* from the final unit
    std::vector<BlockOffsets> blocks;
  };
  static Layout lay_out(const ModelConfig& config, int blocks);
  // Activations of one block, kept for backward.
  struct BlockActs {
    T *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
  };
  // Every activation and the backward scratch: the arrays of one arena. Under recompute the
  // blocks' arrays are all the same ones but res3.
  struct Activations {
    int *inputs, *targets;
    T* encoded;
    std::vector<BlockActs> blocks;
    T *lnf, *logits, *branch;
    float *lnf_mean, *lnf_rstd;
    // Backward scratch, reused by every block.
    T *dresidual, *dln, *datty, *dqkv, *dfch, *datt;
  };
  // Plans x's arrays in `arena` for `blocks` blocks and max_batch sequences; each block's att
  // and the backward's datt take `attention`'s sizes (LayerKernels::attention_buffers), the
  // logits at least [gpt_classifier_rows, V] and `classifier` elements
  // (classifier_scratch_elements).
  static void plan(DeviceArena& arena, Activations& x, const ModelConfig& config, int blocks,
                   int max_batch, const AttentionBuffers& attention, size_t classifier);

  // Runs the forward pass over B sequences of Tn tokens of the uploaded inputs up to the final
  // layernorm (a_.lnf). Unit 0 (embeddings, tied LM head) is acquired into p0_ and left
  // acquired; the caller releases it (backward does). `training`: with dropout (draws_).
  void forward_to_head(ParamAccess& access, int B, int Tn, bool training);
  // One block's forward from `residual` into x (its parameters p), B sequences of Tn tokens.
  // Block l from x.ln1 (already made from `residual`, its input) to a_.branch, the MLP's
  // output: res2 and ln_2 in one fused pass. The block's output res3 = res2 + a_.branch is left
  // to the layernorm that follows (forward_to_head).
  void block_forward(int l, const T* p, const T* residual, int B, int Tn, bool training);
  // Dropout's sites (the header above) and its call: out = in with site's mask of this
  // micro-batch (draws_); nothing when model.dropout is 0 or not training.
  static uint32_t embedding_site() { return 0; }
  static uint32_t attention_site(int l) { return 1 + 2 * static_cast<uint32_t>(l); }
  static uint32_t mlp_site(int l) { return 2 + 2 * static_cast<uint32_t>(l); }
  bool drops(bool training) const { return training && dropout_.threshold > 0; }
  void drop(T* out, const T* in, uint32_t site, int B, int Tn);
  // The layernorm of the residual stream after block l (l < 0: the embedding's output a_.encoded)
  // into out, over N rows; after a block it also makes that block's res3 = res2 + a_.branch in the
  // same pass (LayerKernels::residual_layernorm_forward).
  void stream_layernorm(int l, T* out, float* mean, float* rstd, const T* weight, const T* bias,
                        int N);
  // After forward_to_head: the classifier with its queued loss (the targets in a_.targets,
  // LayerKernels::queue_classifier_forward_backward, classifier_rows_ rows a call), then the
  // backward; releases unit 0 at the end.
  void backward(ParamAccess& access, int B, float grad_scale);
  int final_unit() const { return L_ + 1; }

  int V_, T_, C_, H_, L_, max_batch_;
  bool recompute_;
  DropoutKey dropout_;   // model.dropout's threshold and scale; the rest is draws_'s
  MicroBatchKey draws_;  // the training micro-batch being run
  int classifier_rows_;  // gpt_classifier_rows: the logits' rows
  ParamLayout layout_;
  std::vector<ParamUnit> units_;
  size_t wte_, wpe_, lnf_w_, lnf_b_;  // wte_, wpe_ from unit 0; lnf_* from the final unit
  const T* p0_ = nullptr;             // unit 0's parameters, held from forward to its release
  std::vector<BlockOffsets> blocks_;

  LayerKernels<T>& k_;
  DeviceArena memory_;         // every activation and the backward scratch, planned once
  Activations a_;              // its arrays
  HostLogits<T> host_logits_;  // next_token_logits
};

extern template class GptModel<float>;
extern template class GptModel<bf16>;

}  // namespace rm

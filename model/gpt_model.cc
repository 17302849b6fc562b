#include "model/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/counter_rng.h"
#include "model/footprint_from_layout.h"
#include "model/model_io.h"

namespace rm {

template <typename T>
typename GptModel<T>::Layout GptModel<T>::lay_out(const ModelConfig& c, int blocks) {
  const int64_t C = c.width;
  Layout out;
  ParamLayout& layout = out.params;
  out.wte = layout.add("wte", {c.vocab_size, C}, true);
  out.wpe = layout.add("wpe", {c.seq_len, C}, true);
  out.units.push_back({0, layout.size()});
  for (int l = 0; l < blocks; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const size_t begin = layout.size();
    auto add = [&](const char* name, std::vector<int64_t> shape, bool decay) {
      return layout.add(h + name, std::move(shape), decay) - begin;
    };
    BlockOffsets b;
    b.ln1_w = add("ln_1.weight", {C}, false);
    b.ln1_b = add("ln_1.bias", {C}, false);
    b.qkv_w = add("attn.c_attn.weight", {3 * C, C}, true);
    b.qkv_b = add("attn.c_attn.bias", {3 * C}, false);
    b.proj_w = add("attn.c_proj.weight", {C, C}, true);
    b.proj_b = add("attn.c_proj.bias", {C}, false);
    b.ln2_w = add("ln_2.weight", {C}, false);
    b.ln2_b = add("ln_2.bias", {C}, false);
    b.fc_w = add("mlp.c_fc.weight", {4 * C, C}, true);
    b.fc_b = add("mlp.c_fc.bias", {4 * C}, false);
    b.fcproj_w = add("mlp.c_proj.weight", {C, 4 * C}, true);
    b.fcproj_b = add("mlp.c_proj.bias", {C}, false);
    out.blocks.push_back(b);
    out.units.push_back({begin, layout.size()});
  }
  const size_t final_begin = layout.size();
  out.lnf_w = layout.add("ln_f.weight", {C}, false) - final_begin;
  out.lnf_b = layout.add("ln_f.bias", {C}, false) - final_begin;
  out.units.push_back({final_begin, layout.size()});
  return out;
}

size_t gpt_classifier_rows(const ModelConfig& c, int max_batch) {
  const size_t all = static_cast<size_t>(max_batch) * static_cast<size_t>(c.seq_len);
  const size_t chunk = c.classifier_chunk_tokens > 0 ? c.classifier_chunk_tokens : all;
  return std::min(chunk, all);
}

template <typename T>
void GptModel<T>::plan(DeviceArena& a, Activations& x, const ModelConfig& c, int blocks,
                       int max_batch, const AttentionBuffers& attention, size_t classifier) {
  // Activations and backward scratch for max_batch sequences of seq_len tokens.
  const size_t N = static_cast<size_t>(max_batch) * c.seq_len, C = c.width;
  a.plan(x.inputs, N);
  a.plan(x.targets, N);
  a.plan(x.encoded, N * C);
  x.blocks.resize(blocks);
  for (size_t l = 0; l < x.blocks.size(); ++l) {
    BlockActs& b = x.blocks[l];
    if (c.recompute && l > 0) {
      // Each block's own output; its other arrays are block 0's (the constructor points them
      // there once the arena has placed them).
      a.plan(b.res3, N * C);
      continue;
    }
    a.plan(b.ln1, N * C);
    a.plan(b.ln1_mean, N);
    a.plan(b.ln1_rstd, N);
    a.plan(b.qkv, N * 3 * C);
    a.plan(b.att, attention.saved);
    a.plan(b.atty, N * C);
    a.plan(b.res2, N * C);
    a.plan(b.ln2, N * C);
    a.plan(b.ln2_mean, N);
    a.plan(b.ln2_rstd, N);
    a.plan(b.fch, N * 4 * C);
    a.plan(b.fch_gelu, N * 4 * C);
    a.plan(b.res3, N * C);
  }
  a.plan(x.lnf, N * C);
  a.plan(x.lnf_mean, N);
  a.plan(x.lnf_rstd, N);
  a.plan(x.logits, std::max(gpt_classifier_rows(c, max_batch) * c.vocab_size, classifier));
  a.plan(x.branch, N * C);
  a.plan(x.dresidual, N * C);
  a.plan(x.dln, N * C);
  a.plan(x.datty, N * C);
  a.plan(x.dqkv, N * 3 * C);
  a.plan(x.dfch, N * 4 * C);
  a.plan(x.datt, attention.scratch);
}

template <typename T>
GptModel<T>::GptModel(const ModelConfig& c, int max_batch, Compute* compute)
    : Model(compute),
      V_(c.vocab_size),
      T_(c.seq_len),
      C_(c.width),
      H_(c.heads),
      L_(c.layers),
      max_batch_(max_batch),
      recompute_(c.recompute),
      dropout_(dropout_key(c.dropout)),
      classifier_rows_(static_cast<int>(gpt_classifier_rows(c, max_batch))),
      k_(this->compute().template layers<T>()),
      memory_(this->compute()) {
  if (C_ % H_ != 0) throw std::invalid_argument("gpt: width must be divisible by heads");
  Layout l = lay_out(c, L_);
  layout_ = std::move(l.params);
  units_ = std::move(l.units);
  blocks_ = std::move(l.blocks);
  wte_ = l.wte;
  wpe_ = l.wpe;
  lnf_w_ = l.lnf_w;
  lnf_b_ = l.lnf_b;
  plan(memory_, a_, c, L_, max_batch, k_.attention_buffers(max_batch, T_, C_, H_),
       k_.classifier_scratch_elements(classifier_rows_, C_, V_));  // in one allocation
  memory_.allocate();
  if (recompute_) {
    for (BlockActs& b : a_.blocks) {
      T* const res3 = b.res3;
      b = a_.blocks[0];
      b.res3 = res3;
    }
  }
}

template <typename T>
ModelFootprint GptModel<T>::footprint(const ModelConfig& c, int max_batch) {
  return footprint(c, max_batch, materialised_attention_buffers(max_batch, c.seq_len, c.heads),
                   gpt_classifier_rows(c, max_batch) * c.vocab_size);
}

template <typename T>
ModelFootprint GptModel<T>::footprint(const ModelConfig& c, int max_batch,
                                      const AttentionBuffers& attention, size_t classifier) {
  // Beyond ~2^50 elements in any one array no machine fits it, and size_t arithmetic below
  // could wrap: say "unbounded" instead.
  const double N = static_cast<double>(max_batch) * c.seq_len, C = c.width;
  const double largest = std::max({4 * C * C, static_cast<double>(c.vocab_size) * C, 4 * N * C,
                                   N * c.vocab_size, N * c.heads * static_cast<double>(c.seq_len)});
  if (largest > 0x1p50) return ModelFootprint::unbounded();
  return footprint_from_layout<GptModel>(c, max_batch, attention, classifier);
}

template <typename T>
void GptModel<T>::init_params(float* params, size_t begin, size_t end, uint64_t seed) const {
  const float residual_std = 0.02f / std::sqrt(2.0f * L_);
  for (const TensorSpec& t : layout_.tensors()) {
    // The part of this tensor in [begin, end), as flat indices [lo, hi).
    const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    float* p = params + (lo - begin);
    const bool is_norm = t.name.find("ln_") != std::string::npos;
    const bool is_residual_proj = t.name.find("c_proj.weight") != std::string::npos;
    if (t.shape.size() == 1) {
      // Norm weights are 1, every bias and norm bias is 0.
      const bool norm_weight = is_norm && t.name.find(".weight") != std::string::npos;
      std::fill(p, p + (hi - lo), norm_weight ? 1.0f : 0.0f);
      continue;
    }
    const float std = is_residual_proj ? residual_std : 0.02f;
#pragma omp parallel for
    for (size_t i = lo; i < hi; ++i) {
      p[i - lo] = std * rng_normal(seed, RngPurpose::kInit, i, 0);
    }
  }
}

template <typename T>
void GptModel<T>::forward_to_head(ParamAccess& access, int B, int Tn, bool training) {
  if (B > max_batch_ || Tn > T_) throw std::logic_error("gpt: batch larger than planned");
  const int C = C_, N = B * Tn;
  p0_ = static_cast<const T*>(access.acquire_params(0));
  k_.embedding_forward(a_.encoded, a_.inputs, p0_ + wte_, p0_ + wpe_, B, Tn, C);
  if (drops(training)) drop(a_.encoded, a_.encoded, embedding_site(), B, Tn);
  // Each block's output res3 = res2 + branch is made by the layernorm that reads it next (the
  // next block's ln_1, or ln_f), in one pass with it.
  for (int l = 0; l < L_; ++l) {
    const T* p = static_cast<const T*>(access.acquire_params(1 + l));
    const BlockOffsets& w = blocks_[l];
    BlockActs& x = a_.blocks[l];
    stream_layernorm(l - 1, x.ln1, x.ln1_mean, x.ln1_rstd, p + w.ln1_w, p + w.ln1_b, N);
    block_forward(l, p, l > 0 ? a_.blocks[l - 1].res3 : a_.encoded, B, Tn, training);
    access.release_params(1 + l);
  }
  const T* pf = static_cast<const T*>(access.acquire_params(final_unit()));
  stream_layernorm(L_ - 1, a_.lnf, a_.lnf_mean, a_.lnf_rstd, pf + lnf_w_, pf + lnf_b_, N);
  access.release_params(final_unit());
}

template <typename T>
void GptModel<T>::stream_layernorm(int l, T* out, float* mean, float* rstd, const T* weight,
                                   const T* bias, int N) {
  if (l < 0) {
    k_.layernorm_forward(out, mean, rstd, a_.encoded, weight, bias, N, C_);
    return;
  }
  const BlockActs& x = a_.blocks[l];
  k_.residual_layernorm_forward(x.res3, out, mean, rstd, x.res2, a_.branch, weight, bias, N, C_);
}

template <typename T>
void GptModel<T>::drop(T* out, const T* in, uint32_t site, int B, int Tn) {
  DropoutKey key = dropout_;
  key.seed = draws_.seed;
  key.first_sample = draws_.first_sample;
  key.site = site;
  k_.dropout(out, in, key, B, Tn, C_);
}

template <typename T>
void GptModel<T>::block_forward(int l, const T* p, const T* residual, int B, int Tn,
                                bool training) {
  const int C = C_, N = B * Tn;
  const BlockOffsets& w = blocks_[l];
  BlockActs& x = a_.blocks[l];
  k_.linear_forward(x.qkv, x.ln1, p + w.qkv_w, p + w.qkv_b, N, C, 3 * C);
  k_.attention_forward(x.atty, x.att, x.qkv, B, Tn, C, H_);
  k_.linear_forward(a_.branch, x.atty, p + w.proj_w, p + w.proj_b, N, C, C);
  if (drops(training)) drop(a_.branch, a_.branch, attention_site(l), B, Tn);
  k_.residual_layernorm_forward(x.res2, x.ln2, x.ln2_mean, x.ln2_rstd, residual, a_.branch,
                                p + w.ln2_w, p + w.ln2_b, N, C);
  k_.linear_gelu_forward(x.fch_gelu, x.fch, x.ln2, p + w.fc_w, p + w.fc_b, N, C, 4 * C);
  k_.linear_forward(a_.branch, x.fch_gelu, p + w.fcproj_w, p + w.fcproj_b, N, 4 * C, C);
  if (drops(training)) drop(a_.branch, a_.branch, mlp_site(l), B, Tn);
}

template <typename T>
void GptModel<T>::backward(ParamAccess& access, int B, float grad_scale) {
  // One residual-gradient buffer flows down the stack: each layernorm_backward adds its input
  // gradient into it, which is exactly the residual rule.
  const int C = C_, Tn = T_, N = B * Tn;
  const size_t NC = static_cast<size_t>(N) * C;
  float* g0 = access.acquire_grads(0);
  for (int r0 = 0; r0 < N; r0 += classifier_rows_) {
    const int n = std::min(classifier_rows_, N - r0);
    const size_t at = static_cast<size_t>(r0) * C;
    k_.queue_classifier_forward_backward(a_.dln + at, g0 + wte_, a_.logits, a_.lnf + at, p0_ + wte_,
                                         a_.targets + r0, n, C, V_, grad_scale, r0 > 0);
  }
  compute().zero(a_.dresidual, NC * sizeof(T));
  const T* last = L_ > 0 ? a_.blocks[L_ - 1].res3 : a_.encoded;
  {
    const T* pf = static_cast<const T*>(access.acquire_params(final_unit()));
    float* gf = access.acquire_grads(final_unit());
    k_.layernorm_backward(a_.dresidual, gf + lnf_w_, gf + lnf_b_, a_.dln, last, pf + lnf_w_,
                          a_.lnf_mean, a_.lnf_rstd, N, C);
    access.release_params(final_unit());
    access.release_grads(final_unit());
  }
  for (int l = L_ - 1; l >= 0; --l) {
    const BlockOffsets& w = blocks_[l];
    const BlockActs& x = a_.blocks[l];
    const T* residual = l > 0 ? a_.blocks[l - 1].res3 : a_.encoded;
    const T* p = static_cast<const T*>(access.acquire_params(1 + l));
    float* g = access.acquire_grads(1 + l);
    // Under recompute the shared arrays hold the last block's activations: the others are
    // made again from their kept input, ln_1 by layernorm_forward (the bits of the fused pass
    // that made it in the forward); res3 is kept, and the branch the recomputation leaves in
    // a_.branch is read by nothing.
    if (recompute_ && l < L_ - 1) {
      k_.layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, residual, p + w.ln1_w, p + w.ln1_b, N, C);
      block_forward(l, p, residual, B, Tn, /*training=*/true);
    }
    // A dropped branch's output gradient is the residual stream's through the same mask, made
    // in a_.branch (free in the backward) and read by the branch's last linear.
    const T* dbranch = a_.dresidual;
    if (drops(true)) {
      drop(a_.branch, a_.dresidual, mlp_site(l), B, Tn);
      dbranch = a_.branch;
    }
    // MLP branch: res3 = res2 + fcproj(gelu(fc(ln2(res2)))).
    k_.linear_backward_into_gelu(a_.dfch, g + w.fcproj_w, g + w.fcproj_b, dbranch, x.fch_gelu,
                                 p + w.fcproj_w, x.fch, N, 4 * C, C);
    k_.linear_backward(a_.dln, g + w.fc_w, g + w.fc_b, a_.dfch, x.ln2, p + w.fc_w, N, C, 4 * C);
    k_.layernorm_backward(a_.dresidual, g + w.ln2_w, g + w.ln2_b, a_.dln, x.res2, p + w.ln2_w,
                          x.ln2_mean, x.ln2_rstd, N, C);
    // Attention branch: res2 = residual + proj(attention(qkv(ln1(residual)))).
    if (drops(true)) drop(a_.branch, a_.dresidual, attention_site(l), B, Tn);
    k_.linear_backward(a_.datty, g + w.proj_w, g + w.proj_b, dbranch, x.atty, p + w.proj_w, N, C,
                       C);
    k_.attention_backward(a_.dqkv, a_.datt, a_.datty, x.qkv, x.att, x.atty, B, Tn, C, H_);
    k_.linear_backward(a_.dln, g + w.qkv_w, g + w.qkv_b, a_.dqkv, x.ln1, p + w.qkv_w, N, C, 3 * C);
    k_.layernorm_backward(a_.dresidual, g + w.ln1_w, g + w.ln1_b, a_.dln, residual, p + w.ln1_w,
                          x.ln1_mean, x.ln1_rstd, N, C);
    access.release_params(1 + l);
    access.release_grads(1 + l);
  }
  // The embeddings' dropout last: the stream's gradient is read by nothing after it.
  if (drops(true)) drop(a_.dresidual, a_.dresidual, embedding_site(), B, Tn);
  k_.embedding_backward(g0 + wte_, g0 + wpe_, a_.dresidual, a_.inputs, B, Tn, C);
  access.release_grads(0);
  access.release_params(0);
}

template <typename T>
void GptModel<T>::queue_forward_backward(ParamAccess& access, const int* inputs, const int* targets,
                                         int B, float grad_scale, const MicroBatchKey& key) {
  draws_ = key;
  upload_tokens(compute(), a_.inputs, a_.targets, inputs, targets, static_cast<size_t>(B) * T_);
  forward_to_head(access, B, T_, /*training=*/true);
  backward(access, B, grad_scale);
}

template <typename T>
double GptModel<T>::forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                                 int B) {
  upload_tokens(compute(), a_.inputs, a_.targets, inputs, targets, static_cast<size_t>(B) * T_);
  forward_to_head(access, B, T_, /*training=*/false);
  const int N = B * T_;
  double loss = 0;
  for (int r0 = 0; r0 < N; r0 += classifier_rows_) {
    const int n = std::min(classifier_rows_, N - r0);
    k_.linear_forward(a_.logits, a_.lnf + static_cast<size_t>(r0) * C_, p0_ + wte_, nullptr, n, C_,
                      V_);
    if (r0 + n == N) access.release_params(0);  // as before chunks: before the last loss
    loss += k_.cross_entropy_forward(a_.logits, a_.targets + r0, n, V_);
  }
  return loss;
}

template <typename T>
std::vector<double> GptModel<T>::span_losses(ParamAccess& access, const int* inputs,
                                             const int* targets, int B, int len,
                                             const std::vector<TokenSpan>& spans) {
  if (len < 1 || len > T_) throw std::invalid_argument("gpt: span_losses rows of 1 to seq_len");
  if (B < 1 || B > max_batch_)
    throw std::invalid_argument("gpt: span_losses of 1 to max_batch rows");
  for (const TokenSpan& s : spans) {
    if (s.row < 0 || s.row >= B || s.first < 0 || s.count < 0 || s.first + s.count > len) {
      throw std::invalid_argument("gpt: span_losses span outside the rows");
    }
  }
  upload_tokens(compute(), a_.inputs, a_.targets, inputs, targets, static_cast<size_t>(B) * len);
  forward_to_head(access, B, len, /*training=*/false);
  // The classifier over each span's rows only, as many at a time as the logits hold.
  std::vector<double> losses;
  losses.reserve(spans.size());
  for (const TokenSpan& s : spans) {
    double loss = 0;
    const size_t at = static_cast<size_t>(s.row) * len + s.first;
    for (int r0 = 0; r0 < s.count; r0 += classifier_rows_) {
      const int n = std::min(classifier_rows_, s.count - r0);
      k_.linear_forward(a_.logits, a_.lnf + (at + r0) * C_, p0_ + wte_, nullptr, n, C_, V_);
      loss += k_.cross_entropy_forward(a_.logits, a_.targets + at + r0, n, V_);
    }
    losses.push_back(loss);
  }
  access.release_params(0);
  return losses;
}

template <typename T>
const float* GptModel<T>::next_token_logits(ParamAccess& access, const int* context, int len) {
  if (len < 1) throw std::invalid_argument("gpt: empty context");
  const int Tn = len < T_ ? len : T_;
  upload_tokens(compute(), a_.inputs, a_.targets, context + (len - Tn), nullptr, Tn);
  forward_to_head(access, 1, Tn, /*training=*/false);
  // The last position's logits are the ones read; the classifier runs over as many of the
  // last rows as the logits hold (all Tn of them unless model.classifier_chunk_tokens < Tn).
  const int first = std::max(0, Tn - classifier_rows_);
  k_.linear_forward(a_.logits, a_.lnf + static_cast<size_t>(first) * C_, p0_ + wte_, nullptr,
                    Tn - first, C_, V_);
  access.release_params(0);
  return host_logits_.fetch(compute(), a_.logits + static_cast<size_t>(Tn - 1 - first) * V_, V_);
}

template <typename T>
std::vector<GemmShape> GptModel<T>::train_gemms(int B) const {
  // Forward out = in W^T is (N x K) (K x M)^T; backward dIn = dOut W, dW += dOut^T In.
  const int N = B * T_, C = C_, hs = C_ / H_;
  std::vector<GemmShape> g;
  auto linear = [&](int in, int out, int64_t times, int rows) {
    g.push_back({false, true, rows, out, in, times, false});   // forward
    g.push_back({false, false, rows, in, out, times, false});  // dinp
    g.push_back({true, false, out, in, rows, times, false});   // dweight
  };
  linear(C, 3 * C, L_, N);
  linear(C, C, L_, N);
  linear(C, 4 * C, L_, N);
  linear(4 * C, C, L_, N);
  // LM head (tied embedding), classifier_rows_ rows a call.
  const int rows = std::min(classifier_rows_, N);
  linear(C, V_, N / rows, rows);
  if (N % rows != 0) linear(C, V_, 1, N % rows);
  const int64_t heads = static_cast<int64_t>(B) * H_ * L_;
  g.push_back({false, true, T_, T_, hs, heads, true});   // scores = q k^T
  g.push_back({false, false, T_, hs, T_, heads, true});  // y = att v
  g.push_back({true, false, T_, hs, T_, heads, true});   // dv = att^T dy
  g.push_back({false, true, T_, T_, hs, heads, true});   // datt = dy v^T
  g.push_back({false, false, T_, hs, T_, heads, true});  // dq = dpre k
  g.push_back({true, false, T_, hs, T_, heads, true});   // dk = dpre^T q
  return g;
}

template class GptModel<float>;
template class GptModel<bf16>;

}  // namespace rm

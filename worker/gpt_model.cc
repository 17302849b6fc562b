#include "worker/gpt_model.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/kernels.h"
#include "worker/data/counter_rng.h"

namespace rm {
namespace {

// Carves consecutive sub-arrays out of one allocation.
class Arena {
 public:
  explicit Arena(std::vector<float>& memory) : memory_(memory) {}
  void reserve(size_t n) { total_ += n; }
  void allocate() { memory_.assign(total_, 0.0f); }
  float* take(size_t n) {
    float* p = memory_.data() + used_;
    used_ += n;
    return p;
  }

 private:
  std::vector<float>& memory_;
  size_t total_ = 0, used_ = 0;
};

}  // namespace

GptModel::GptModel(const ModelConfig& c, int max_batch)
    : V_(c.vocab_size), T_(c.seq_len), C_(c.width), H_(c.heads), L_(c.layers),
      max_batch_(max_batch) {
  if (C_ % H_ != 0) throw std::invalid_argument("gpt: width must be divisible by heads");
  const int64_t C = C_;
  wte_ = layout_.add("wte", {V_, C}, true);
  wpe_ = layout_.add("wpe", {T_, C}, true);
  units_.push_back({0, layout_.size()});
  for (int l = 0; l < L_; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const size_t begin = layout_.size();
    auto add = [&](const char* name, std::vector<int64_t> shape, bool decay) {
      return layout_.add(h + name, std::move(shape), decay) - begin;
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
    blocks_.push_back(b);
    units_.push_back({begin, layout_.size()});
  }
  const size_t final_begin = layout_.size();
  lnf_w_ = layout_.add("ln_f.weight", {C}, false) - final_begin;
  lnf_b_ = layout_.add("ln_f.bias", {C}, false) - final_begin;
  units_.push_back({final_begin, layout_.size()});

  // Activations for max_batch sequences of T tokens.
  const size_t N = static_cast<size_t>(max_batch) * T_;
  const size_t att = static_cast<size_t>(max_batch) * H_ * T_ * T_;
  Arena a(act_memory_);
  a.reserve(N * C);  // encoded
  for (int l = 0; l < L_; ++l) {
    a.reserve(N * C * 8 + N * 4 + att + N * 4 * C * 2);
  }
  a.reserve(N * C + 2 * N + N * V_ + N * C);
  a.allocate();
  encoded_ = a.take(N * C);
  for (int l = 0; l < L_; ++l) {
    BlockActs x;
    x.ln1 = a.take(N * C);
    x.ln1_mean = a.take(N);
    x.ln1_rstd = a.take(N);
    x.qkv = a.take(N * 3 * C);
    x.att = a.take(att);
    x.atty = a.take(N * C);
    x.res2 = a.take(N * C);
    x.ln2 = a.take(N * C);
    x.ln2_mean = a.take(N);
    x.ln2_rstd = a.take(N);
    x.fch = a.take(N * 4 * C);
    x.fch_gelu = a.take(N * 4 * C);
    x.res3 = a.take(N * C);
    acts_.push_back(x);
  }
  lnf_ = a.take(N * C);
  lnf_mean_ = a.take(N);
  lnf_rstd_ = a.take(N);
  logits_ = a.take(N * V_);
  branch_ = a.take(N * C);

  Arena g(grad_memory_);
  g.reserve(N * C * 3 + N * 3 * C + N * 4 * C * 2 + att);
  g.allocate();
  dresidual_ = g.take(N * C);
  dln_ = g.take(N * C);
  datty_ = g.take(N * C);
  dqkv_ = g.take(N * 3 * C);
  dfch_ = g.take(N * 4 * C);
  dfch_gelu_ = g.take(N * 4 * C);
  datt_ = g.take(att);
}

void GptModel::init_params(float* params, uint64_t seed) const {
  const float residual_std = 0.02f / std::sqrt(2.0f * L_);
  for (const TensorSpec& t : layout_.tensors()) {
    float* p = params + t.offset;
    const bool is_norm = t.name.find("ln_") != std::string::npos;
    const bool is_residual_proj = t.name.find("c_proj.weight") != std::string::npos;
    if (t.shape.size() == 1) {
      // Norm weights are 1, every bias and norm bias is 0.
      const bool norm_weight = is_norm && t.name.find(".weight") != std::string::npos;
      std::fill(p, p + t.numel, norm_weight ? 1.0f : 0.0f);
      continue;
    }
    const float std = is_residual_proj ? residual_std : 0.02f;
#pragma omp parallel for
    for (size_t i = 0; i < t.numel; ++i) {
      p[i] = std * rng_normal(seed, RngPurpose::kInit, t.offset + i, 0);
    }
  }
}

void GptModel::forward(ParamAccess& access, const int* inputs, int B, int T) {
  if (B > max_batch_ || T > T_) throw std::logic_error("gpt: batch larger than planned");
  const int C = C_, N = B * T;
  p0_ = access.acquire_params(0);
  cpu::embedding_forward(encoded_, inputs, p0_ + wte_, p0_ + wpe_, B, T, C);
  const float* residual = encoded_;
  for (int l = 0; l < L_; ++l) {
    const BlockOffsets& w = blocks_[l];
    BlockActs& x = acts_[l];
    const float* p = access.acquire_params(1 + l);
    cpu::layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, residual, p + w.ln1_w, p + w.ln1_b, N,
                           C);
    cpu::linear_forward(x.qkv, x.ln1, p + w.qkv_w, p + w.qkv_b, N, C, 3 * C);
    cpu::attention_forward(x.atty, x.att, x.qkv, B, T, C, H_);
    cpu::linear_forward(branch_, x.atty, p + w.proj_w, p + w.proj_b, N, C, C);
    cpu::add(x.res2, residual, branch_, static_cast<size_t>(N) * C);
    cpu::layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, p + w.ln2_w, p + w.ln2_b, N,
                           C);
    cpu::linear_forward(x.fch, x.ln2, p + w.fc_w, p + w.fc_b, N, C, 4 * C);
    cpu::gelu_forward(x.fch_gelu, x.fch, N * 4 * C);
    cpu::linear_forward(branch_, x.fch_gelu, p + w.fcproj_w, p + w.fcproj_b, N, 4 * C, C);
    cpu::add(x.res3, x.res2, branch_, static_cast<size_t>(N) * C);
    access.release_params(1 + l);
    residual = x.res3;
  }
  const float* pf = access.acquire_params(final_unit());
  cpu::layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, residual, pf + lnf_w_, pf + lnf_b_, N, C);
  access.release_params(final_unit());
  cpu::linear_forward(logits_, lnf_, p0_ + wte_, nullptr, N, C, V_);
}

void GptModel::backward(ParamAccess& access, const int* inputs, int B) {
  // One residual-gradient buffer flows down the stack: each layernorm_backward adds its input
  // gradient into it, which is exactly the residual rule.
  const int C = C_, T = T_, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  float* g0 = access.acquire_grads(0);
  cpu::linear_backward(dln_, g0 + wte_, nullptr, logits_, lnf_, p0_ + wte_, N, C, V_);
  std::memset(dresidual_, 0, NC * sizeof(float));
  const float* last = L_ > 0 ? acts_[L_ - 1].res3 : encoded_;
  {
    const float* pf = access.acquire_params(final_unit());
    float* gf = access.acquire_grads(final_unit());
    cpu::layernorm_backward(dresidual_, gf + lnf_w_, gf + lnf_b_, dln_, last, pf + lnf_w_,
                            lnf_mean_, lnf_rstd_, N, C);
    access.release_params(final_unit());
    access.release_grads(final_unit());
  }
  for (int l = L_ - 1; l >= 0; --l) {
    const BlockOffsets& w = blocks_[l];
    const BlockActs& x = acts_[l];
    const float* residual = l > 0 ? acts_[l - 1].res3 : encoded_;
    const float* p = access.acquire_params(1 + l);
    float* g = access.acquire_grads(1 + l);
    // MLP branch: res3 = res2 + fcproj(gelu(fc(ln2(res2)))).
    cpu::linear_backward(dfch_gelu_, g + w.fcproj_w, g + w.fcproj_b, dresidual_, x.fch_gelu,
                         p + w.fcproj_w, N, 4 * C, C);
    cpu::gelu_backward(dfch_, x.fch, dfch_gelu_, N * 4 * C);
    cpu::linear_backward(dln_, g + w.fc_w, g + w.fc_b, dfch_, x.ln2, p + w.fc_w, N, C, 4 * C);
    cpu::layernorm_backward(dresidual_, g + w.ln2_w, g + w.ln2_b, dln_, x.res2, p + w.ln2_w,
                            x.ln2_mean, x.ln2_rstd, N, C);
    // Attention branch: res2 = residual + proj(attention(qkv(ln1(residual)))).
    cpu::linear_backward(datty_, g + w.proj_w, g + w.proj_b, dresidual_, x.atty, p + w.proj_w, N,
                         C, C);
    cpu::attention_backward(dqkv_, datt_, datty_, x.qkv, x.att, B, T, C, H_);
    cpu::linear_backward(dln_, g + w.qkv_w, g + w.qkv_b, dqkv_, x.ln1, p + w.qkv_w, N, C,
                         3 * C);
    cpu::layernorm_backward(dresidual_, g + w.ln1_w, g + w.ln1_b, dln_, residual, p + w.ln1_w,
                            x.ln1_mean, x.ln1_rstd, N, C);
    access.release_params(1 + l);
    access.release_grads(1 + l);
  }
  cpu::embedding_backward(g0 + wte_, g0 + wpe_, dresidual_, inputs, B, T, C);
  access.release_grads(0);
  access.release_params(0);
}

double GptModel::forward_backward(ParamAccess& access, const int* inputs, const int* targets,
                                  int B, float grad_scale) {
  forward(access, inputs, B, T_);
  const double loss = cpu::cross_entropy_forward_backward(logits_, targets, B * T_, V_, grad_scale);
  backward(access, inputs, B);
  return loss;
}

double GptModel::forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                              int B) {
  forward(access, inputs, B, T_);
  access.release_params(0);
  return cpu::cross_entropy_forward(nullptr, logits_, targets, B * T_, V_);
}

const float* GptModel::next_token_logits(ParamAccess& access, const int* context, int len) {
  if (len < 1) throw std::invalid_argument("gpt: empty context");
  const int T = len < T_ ? len : T_;
  forward(access, context + (len - T), 1, T);
  access.release_params(0);
  return logits_ + static_cast<size_t>(T - 1) * V_;
}

std::vector<GemmShape> GptModel::train_gemms(int B) const {
  // Forward out = in W^T is (N x K) (K x M)^T; backward dIn = dOut W, dW += dOut^T In.
  const int N = B * T_, C = C_, hs = C_ / H_;
  std::vector<GemmShape> g;
  auto linear = [&](int in, int out, int64_t times) {
    g.push_back({false, true, N, out, in, times, false});   // forward
    g.push_back({false, false, N, in, out, times, false});  // dinp
    g.push_back({true, false, out, in, N, times, false});   // dweight
  };
  linear(C, 3 * C, L_);
  linear(C, C, L_);
  linear(C, 4 * C, L_);
  linear(4 * C, C, L_);
  linear(C, V_, 1);  // LM head (tied embedding)
  const int64_t heads = static_cast<int64_t>(B) * H_ * L_;
  g.push_back({false, true, T_, T_, hs, heads, true});   // scores = q k^T
  g.push_back({false, false, T_, hs, T_, heads, true});  // y = att v
  g.push_back({true, false, T_, hs, T_, heads, true});   // dv = att^T dy
  g.push_back({false, true, T_, T_, hs, heads, true});   // datt = dy v^T
  g.push_back({false, false, T_, hs, T_, heads, true});  // dq = dpre k
  g.push_back({true, false, T_, hs, T_, heads, true});   // dk = dpre^T q
  return g;
}

}  // namespace rm

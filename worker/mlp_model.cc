#include "worker/mlp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/kernels.h"
#include "worker/data/counter_rng.h"

namespace rm {

MlpModel::MlpModel(const ModelConfig& c, int max_batch)
    : V_(c.vocab_size), T_(c.seq_len), K_(c.mlp_context), E_(c.mlp_embed), W_(c.width),
      L_(c.layers), max_batch_(max_batch) {
  layout_.add("emb", {V_, E_}, true);
  units_.push_back({0, layout_.size()});
  int in = K_ * E_;
  for (int l = 0; l <= L_; ++l) {
    const bool head = l == L_;
    const int out = head ? V_ : W_;
    const std::string name = head ? "head" : "fc." + std::to_string(l);
    const size_t begin = layout_.size();
    Layer layer;
    layer.w = layout_.add(name + ".weight", {out, in}, true) - begin;
    layer.b = layout_.add(name + ".bias", {out}, false) - begin;
    layer.in = in;
    layer.out = out;
    layers_.push_back(layer);
    units_.push_back({begin, layout_.size()});
    in = out;
  }
  const size_t rows = static_cast<size_t>(max_batch) * T_;
  x_.assign(rows * K_ * E_, 0.0f);
  pre_.assign(L_, std::vector<float>(rows * W_));
  post_.assign(L_, std::vector<float>(rows * W_));
  logits_.assign(rows * V_, 0.0f);
  const size_t widest = std::max({W_, K_ * E_, V_});
  dx_.assign(rows * widest, 0.0f);
  dh_.assign(rows * widest, 0.0f);
}

void MlpModel::init_params(float* params, uint64_t seed) const {
  // N(0, 1/fan_in) for the linear layers keeps activations well scaled at any width;
  // embeddings N(0, 1).
  for (const TensorSpec& t : layout_.tensors()) {
    float* p = params + t.offset;
    if (t.shape.size() == 1) {
      std::fill(p, p + t.numel, 0.0f);
      continue;
    }
    const float std = t.name == "emb" ? 1.0f : 1.0f / std::sqrt(static_cast<float>(t.shape[1]));
    for (size_t i = 0; i < t.numel; ++i) {
      p[i] = std * rng_normal(seed, RngPurpose::kInit, t.offset + i, 0);
    }
  }
}

void MlpModel::forward(ParamAccess& access, const int* inputs, int B, int T) {
  if (B > max_batch_ || T > T_) throw std::logic_error("mlp: batch larger than planned");
  const int rows = B * T, KE = K_ * E_;
  const float* emb = access.acquire_params(0);
  // x[b,t] = emb[tok(t-K+1)] | ... | emb[tok(t)], zeros before the start of the sequence.
#pragma omp parallel for
  for (int r = 0; r < rows; ++r) {
    const int b = r / T, t = r % T;
    float* x = x_.data() + static_cast<size_t>(r) * KE;
    for (int j = 0; j < K_; ++j) {
      const int src = t - K_ + 1 + j;
      if (src < 0) {
        std::memset(x + j * E_, 0, E_ * sizeof(float));
      } else {
        const float* e = emb + static_cast<size_t>(inputs[b * T + src]) * E_;
        std::memcpy(x + j * E_, e, E_ * sizeof(float));
      }
    }
  }
  access.release_params(0);
  const float* h = x_.data();
  for (int l = 0; l <= L_; ++l) {
    const Layer& layer = layers_[l];
    const float* p = access.acquire_params(1 + l);
    float* out = l < L_ ? pre_[l].data() : logits_.data();
    cpu::linear_forward(out, h, p + layer.w, p + layer.b, rows, layer.in, layer.out);
    access.release_params(1 + l);
    if (l < L_) {
      cpu::gelu_forward(post_[l].data(), pre_[l].data(), rows * layer.out);
      h = post_[l].data();
    }
  }
}

double MlpModel::forward_backward(ParamAccess& access, const int* inputs, const int* targets,
                                  int B, float grad_scale) {
  forward(access, inputs, B, T_);
  const int rows = B * T_;
  const double loss =
      cpu::cross_entropy_forward_backward(logits_.data(), targets, rows, V_, grad_scale);
  const float* dout = logits_.data();
  for (int l = L_; l >= 0; --l) {
    const Layer& layer = layers_[l];
    const float* in = l > 0 ? post_[l - 1].data() : x_.data();
    const float* p = access.acquire_params(1 + l);
    float* g = access.acquire_grads(1 + l);
    cpu::linear_backward(dx_.data(), g + layer.w, g + layer.b, dout, in, p + layer.w, rows,
                         layer.in, layer.out);
    access.release_params(1 + l);
    access.release_grads(1 + l);
    if (l > 0) {
      cpu::gelu_backward(dh_.data(), pre_[l - 1].data(), dx_.data(), rows * layer.in);
      dout = dh_.data();
    }
  }
  // Scatter the input gradient back to the embedding rows. Serial: tokens repeat, and this is
  // rows * K * E adds, small next to the GEMMs.
  float* demb = access.acquire_grads(0);
  const int KE = K_ * E_;
  for (int r = 0; r < rows; ++r) {
    const int b = r / T_, t = r % T_;
    const float* d = dx_.data() + static_cast<size_t>(r) * KE;
    for (int j = 0; j < K_; ++j) {
      const int src = t - K_ + 1 + j;
      if (src < 0) continue;
      float* row = demb + static_cast<size_t>(inputs[b * T_ + src]) * E_;
      for (int e = 0; e < E_; ++e) row[e] += d[j * E_ + e];
    }
  }
  access.release_grads(0);
  return loss;
}

double MlpModel::forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                              int B) {
  forward(access, inputs, B, T_);
  return cpu::cross_entropy_forward(nullptr, logits_.data(), targets, B * T_, V_);
}

const float* MlpModel::next_token_logits(ParamAccess& access, const int* context, int len) {
  if (len < 1) throw std::invalid_argument("mlp: empty context");
  const int T = std::min(len, T_);
  forward(access, context + (len - T), 1, T);
  return logits_.data() + static_cast<size_t>(T - 1) * V_;
}

std::vector<GemmShape> MlpModel::train_gemms(int B) const {
  const int rows = B * T_;
  std::vector<GemmShape> g;
  for (const Layer& l : layers_) {
    g.push_back({false, true, rows, l.out, l.in, 1, false});
    g.push_back({false, false, rows, l.in, l.out, 1, false});
    g.push_back({true, false, l.out, l.in, rows, 1, false});
  }
  return g;
}

}  // namespace rm

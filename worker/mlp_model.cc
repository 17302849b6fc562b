#include "worker/mlp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "worker/data/counter_rng.h"
#include "worker/model_io.h"

namespace rm {

template <typename T>
MlpModel<T>::MlpModel(const ModelConfig& c, int max_batch, Compute* compute)
    : Model(compute), V_(c.vocab_size), T_(c.seq_len), K_(c.mlp_context), E_(c.mlp_embed),
      W_(c.width), L_(c.layers), max_batch_(max_batch),
      k_(this->compute().template layers<T>()), memory_(this->compute()) {
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
  const size_t widest = std::max({W_, K_ * E_, V_});
  memory_.plan(inputs_, rows);
  memory_.plan(targets_, rows);
  memory_.plan(x_, rows * K_ * E_);
  pre_.resize(L_);
  post_.resize(L_);
  for (int l = 0; l < L_; ++l) {
    memory_.plan(pre_[l], rows * W_);
    memory_.plan(post_[l], rows * W_);
  }
  memory_.plan(logits_, rows * V_);
  memory_.plan(dx_, rows * widest);
  memory_.plan(dh_, rows * widest);
  memory_.allocate();
}

template <typename T>
void MlpModel<T>::init_params(float* params, uint64_t seed) const {
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

template <typename T>
void MlpModel<T>::forward(ParamAccess& access, int B, int Tn) {
  if (B > max_batch_ || Tn > T_) throw std::logic_error("mlp: batch larger than planned");
  const int rows = B * Tn;
  k_.context_embedding_forward(x_, inputs_, static_cast<const T*>(access.acquire_params(0)), B,
                               Tn, K_, E_);
  access.release_params(0);
  const T* h = x_;
  for (int l = 0; l <= L_; ++l) {
    const Layer& layer = layers_[l];
    const T* p = static_cast<const T*>(access.acquire_params(1 + l));
    T* out = l < L_ ? pre_[l] : logits_;
    k_.linear_forward(out, h, p + layer.w, p + layer.b, rows, layer.in, layer.out);
    access.release_params(1 + l);
    if (l < L_) {
      k_.gelu_forward(post_[l], pre_[l], static_cast<size_t>(rows) * layer.out);
      h = post_[l];
    }
  }
}

template <typename T>
double MlpModel<T>::forward_backward(ParamAccess& access, const int* inputs, const int* targets,
                                     int B, float grad_scale) {
  upload_tokens(compute(), inputs_, targets_, inputs, targets, static_cast<size_t>(B) * T_);
  forward(access, B, T_);
  const int rows = B * T_;
  const double loss = k_.cross_entropy_forward_backward(logits_, targets_, rows, V_, grad_scale);
  const T* dout = logits_;
  for (int l = L_; l >= 0; --l) {
    const Layer& layer = layers_[l];
    const T* in = l > 0 ? post_[l - 1] : x_;
    const T* p = static_cast<const T*>(access.acquire_params(1 + l));
    float* g = access.acquire_grads(1 + l);
    k_.linear_backward(dx_, g + layer.w, g + layer.b, dout, in, p + layer.w, rows, layer.in,
                       layer.out);
    access.release_params(1 + l);
    access.release_grads(1 + l);
    if (l > 0) {
      k_.gelu_backward(dh_, pre_[l - 1], dx_, static_cast<size_t>(rows) * layer.in);
      dout = dh_;
    }
  }
  // The input gradient goes back to the embedding rows it came from.
  float* demb = access.acquire_grads(0);
  k_.context_embedding_backward(demb, dx_, inputs_, B, T_, K_, E_);
  access.release_grads(0);
  return loss;
}

template <typename T>
double MlpModel<T>::forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                                 int B) {
  upload_tokens(compute(), inputs_, targets_, inputs, targets, static_cast<size_t>(B) * T_);
  forward(access, B, T_);
  return k_.cross_entropy_forward(logits_, targets_, B * T_, V_);
}

template <typename T>
const float* MlpModel<T>::next_token_logits(ParamAccess& access, const int* context, int len) {
  if (len < 1) throw std::invalid_argument("mlp: empty context");
  const int Tn = std::min(len, T_);
  upload_tokens(compute(), inputs_, targets_, context + (len - Tn), nullptr, Tn);
  forward(access, 1, Tn);
  return host_logits_.fetch(compute(), logits_ + static_cast<size_t>(Tn - 1) * V_, V_);
}

template <typename T>
std::vector<GemmShape> MlpModel<T>::train_gemms(int B) const {
  const int rows = B * T_;
  std::vector<GemmShape> g;
  for (const Layer& l : layers_) {
    g.push_back({false, true, rows, l.out, l.in, 1, false});
    g.push_back({false, false, rows, l.in, l.out, 1, false});
    g.push_back({true, false, l.out, l.in, rows, 1, false});
  }
  return g;
}

template class MlpModel<float>;
template class MlpModel<bf16>;

}  // namespace rm

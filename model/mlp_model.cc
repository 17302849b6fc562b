#include "model/mlp_model.h"

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
typename MlpModel<T>::Layout MlpModel<T>::lay_out(const ModelConfig& c, int hidden) {
  const int V = c.vocab_size, E = c.mlp_embed;
  Layout out;
  ParamLayout& layout = out.params;
  layout.add("emb", {V, E}, true);
  out.units.push_back({0, layout.size()});
  int in = c.mlp_context * E;
  for (int l = 0; l <= hidden; ++l) {
    const bool head = l == hidden;
    const int width = head ? V : c.width;
    const std::string name = head ? "head" : "fc." + std::to_string(l);
    const size_t begin = layout.size();
    Layer layer;
    layer.w = layout.add(name + ".weight", {width, in}, true) - begin;
    layer.b = layout.add(name + ".bias", {width}, false) - begin;
    layer.in = in;
    layer.out = width;
    out.layers.push_back(layer);
    out.units.push_back({begin, layout.size()});
    in = width;
  }
  return out;
}

template <typename T>
void MlpModel<T>::plan(DeviceArena& a, Activations& x, const ModelConfig& c, int hidden,
                       int max_batch) {
  const size_t rows = static_cast<size_t>(max_batch) * c.seq_len;
  const size_t KE = static_cast<size_t>(c.mlp_context) * c.mlp_embed;
  const size_t W = c.width, V = c.vocab_size;
  const size_t widest = std::max({W, KE, V});
  a.plan(x.inputs, rows);
  a.plan(x.targets, rows);
  a.plan(x.x, rows * KE);
  x.pre.resize(hidden);
  x.post.resize(hidden);
  for (int l = 0; l < hidden; ++l) {
    a.plan(x.pre[l], rows * W);
    a.plan(x.post[l], rows * W);
  }
  a.plan(x.logits, rows * V);
  a.plan(x.dx, rows * widest);
  a.plan(x.dh, rows * widest);
}

template <typename T>
MlpModel<T>::MlpModel(const ModelConfig& c, int max_batch, Compute* compute)
    : Model(compute), V_(c.vocab_size), T_(c.seq_len), K_(c.mlp_context), E_(c.mlp_embed),
      W_(c.width), L_(c.layers), max_batch_(max_batch),
      k_(this->compute().template layers<T>()), memory_(this->compute()) {
  Layout l = lay_out(c, L_);
  layout_ = std::move(l.params);
  units_ = std::move(l.units);
  layers_ = std::move(l.layers);
  plan(memory_, a_, c, L_, max_batch);
  memory_.allocate();
}

template <typename T>
ModelFootprint MlpModel<T>::footprint(const ModelConfig& c, int max_batch) {
  // As GptModel::footprint: past ~2^50 elements in one array, "unbounded".
  const double rows = static_cast<double>(max_batch) * c.seq_len;
  const double widest = std::max({static_cast<double>(c.width), static_cast<double>(c.vocab_size),
                                  static_cast<double>(c.mlp_context) * c.mlp_embed});
  if (rows * widest > 0x1p50 || widest * widest > 0x1p50) {
    return ModelFootprint::unbounded();
  }
  return footprint_from_layout<MlpModel>(c, max_batch);
}

template <typename T>
void MlpModel<T>::init_params(float* params, size_t begin, size_t end, uint64_t seed) const {
  // N(0, 1/fan_in) for the linear layers keeps activations well scaled at any width;
  // embeddings N(0, 1).
  for (const TensorSpec& t : layout_.tensors()) {
    // The part of this tensor in [begin, end), as flat indices [lo, hi).
    const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    float* p = params + (lo - begin);
    if (t.shape.size() == 1) {
      std::fill(p, p + (hi - lo), 0.0f);
      continue;
    }
    const float std = t.name == "emb" ? 1.0f : 1.0f / std::sqrt(static_cast<float>(t.shape[1]));
    for (size_t i = lo; i < hi; ++i) {
      p[i - lo] = std * rng_normal(seed, RngPurpose::kInit, i, 0);
    }
  }
}

template <typename T>
void MlpModel<T>::forward(ParamAccess& access, int B, int Tn) {
  if (B > max_batch_ || Tn > T_) throw std::logic_error("mlp: batch larger than planned");
  const int rows = B * Tn;
  k_.context_embedding_forward(a_.x, a_.inputs, static_cast<const T*>(access.acquire_params(0)), B,
                               Tn, K_, E_);
  access.release_params(0);
  const T* h = a_.x;
  for (int l = 0; l <= L_; ++l) {
    const Layer& layer = layers_[l];
    const T* p = static_cast<const T*>(access.acquire_params(1 + l));
    T* out = l < L_ ? a_.pre[l] : a_.logits;
    k_.linear_forward(out, h, p + layer.w, p + layer.b, rows, layer.in, layer.out);
    access.release_params(1 + l);
    if (l < L_) {
      k_.gelu_forward(a_.post[l], a_.pre[l], static_cast<size_t>(rows) * layer.out);
      h = a_.post[l];
    }
  }
}

template <typename T>
void MlpModel<T>::queue_forward_backward(ParamAccess& access, const int* inputs, const int* targets,
                                         int B, float grad_scale, const MicroBatchKey& /*key*/) {
  upload_tokens(compute(), a_.inputs, a_.targets, inputs, targets, static_cast<size_t>(B) * T_);
  forward(access, B, T_);
  const int rows = B * T_;
  k_.queue_cross_entropy_forward_backward(a_.logits, a_.targets, rows, V_, grad_scale);
  const T* dout = a_.logits;
  for (int l = L_; l >= 0; --l) {
    const Layer& layer = layers_[l];
    const T* in = l > 0 ? a_.post[l - 1] : a_.x;
    const T* p = static_cast<const T*>(access.acquire_params(1 + l));
    float* g = access.acquire_grads(1 + l);
    k_.linear_backward(a_.dx, g + layer.w, g + layer.b, dout, in, p + layer.w, rows, layer.in,
                       layer.out);
    access.release_params(1 + l);
    access.release_grads(1 + l);
    if (l > 0) {
      k_.gelu_backward(a_.dh, a_.pre[l - 1], a_.dx, static_cast<size_t>(rows) * layer.in);
      dout = a_.dh;
    }
  }
  // The input gradient goes back to the embedding rows it came from.
  float* demb = access.acquire_grads(0);
  k_.context_embedding_backward(demb, a_.dx, a_.inputs, B, T_, K_, E_);
  access.release_grads(0);
}

template <typename T>
double MlpModel<T>::forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                                 int B) {
  upload_tokens(compute(), a_.inputs, a_.targets, inputs, targets, static_cast<size_t>(B) * T_);
  forward(access, B, T_);
  return k_.cross_entropy_forward(a_.logits, a_.targets, B * T_, V_);
}

template <typename T>
const float* MlpModel<T>::next_token_logits(ParamAccess& access, const int* context, int len) {
  if (len < 1) throw std::invalid_argument("mlp: empty context");
  const int Tn = std::min(len, T_);
  upload_tokens(compute(), a_.inputs, a_.targets, context + (len - Tn), nullptr, Tn);
  forward(access, 1, Tn);
  return host_logits_.fetch(compute(), a_.logits + static_cast<size_t>(Tn - 1) * V_, V_);
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

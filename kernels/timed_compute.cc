#include "kernels/timed_compute.h"

#include <algorithm>

namespace rm {
namespace {

std::string shape(std::initializer_list<long long> dims, const char* sep = "x") {
  std::string s;
  for (long long d : dims) s += (s.empty() ? "" : sep) + std::to_string(d);
  return s;
}

// The layer kernels of one storage type, each call timed under its name and shape.
template <typename T>
class TimedLayers final : public LayerKernels<T> {
 public:
  TimedLayers(TimedCompute& t, LayerKernels<T>& inner) : t_(t), k_(inner) {}

  void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn,
                         int C) override {
    t_.timed("embedding_forward " + shape({B, Tn, C}), false,
             [&] { k_.embedding_forward(out, tokens, wte, wpe, B, Tn, C); });
  }
  void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                          int C) override {
    t_.timed("embedding_backward " + shape({B, Tn, C}), false,
             [&] { k_.embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C); });
  }
  void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K,
                                 int E) override {
    t_.timed("context_embedding_forward " + shape({B, Tn, K, E}), false,
             [&] { k_.context_embedding_forward(x, tokens, emb, B, Tn, K, E); });
  }
  void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                  int E) override {
    t_.timed("context_embedding_backward " + shape({B, Tn, K, E}), false,
             [&] { k_.context_embedding_backward(demb, dx, tokens, B, Tn, K, E); });
  }
  void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                         const T* bias, int N, int C) override {
    t_.timed("layernorm_forward " + shape({N, C}), false,
             [&] { k_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); });
  }
  void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a, const T* b,
                                  const T* weight, const T* bias, int N, int C) override {
    t_.timed("residual_layernorm_forward " + shape({N, C}), false, [&] {
      k_.residual_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, N, C);
    });
  }
  void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                          const T* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    t_.timed("layernorm_backward " + shape({N, C}), false, [&] {
      k_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    });
  }
  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                      int OC) override {
    t_.timed("linear_forward " + shape({N, C}) + "->" + std::to_string(OC), false,
             [&] { k_.linear_forward(out, inp, weight, bias, N, C, OC); });
  }
  void linear_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                       const T* weight, int N, int C, int OC) override {
    t_.timed("linear_backward " + shape({N, C}) + "->" + std::to_string(OC), false,
             [&] { k_.linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC); });
  }
  void linear_gelu_forward(T* out, T* pre, const T* inp, const T* weight, const T* bias, int N,
                           int C, int OC) override {
    t_.timed("linear_gelu_forward " + shape({N, C}) + "->" + std::to_string(OC), false,
             [&] { k_.linear_gelu_forward(out, pre, inp, weight, bias, N, C, OC); });
  }
  void linear_backward_into_gelu(T* dpre, float* dweight, float* dbias, const T* dout,
                                 const T* inp, const T* weight, const T* pre, int N, int C,
                                 int OC) override {
    t_.timed("linear_backward_into_gelu " + shape({N, C}) + "->" + std::to_string(OC), false, [&] {
      k_.linear_backward_into_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
    });
  }
  void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) override {
    t_.timed("attention_forward B" + std::to_string(B) + " T" + std::to_string(Tn) + " C" +
                 std::to_string(C) + " H" + std::to_string(H),
             false, [&] { k_.attention_forward(out, att, qkv, B, Tn, C, H); });
  }
  void attention_backward(T* dqkv, T* datt_scratch, const T* dout, const T* qkv, const T* att,
                          const T* out, int B, int Tn, int C, int H) override {
    t_.timed("attention_backward B" + std::to_string(B) + " T" + std::to_string(Tn) + " C" +
                 std::to_string(C) + " H" + std::to_string(H),
             false,
             [&] { k_.attention_backward(dqkv, datt_scratch, dout, qkv, att, out, B, Tn, C, H); });
  }
  AttentionBuffers attention_buffers(int B, int Tn, int C, int H) const override {
    return k_.attention_buffers(B, Tn, C, H);
  }
  void gelu_forward(T* out, const T* inp, size_t n) override {
    t_.timed("gelu_forward " + std::to_string(n), false, [&] { k_.gelu_forward(out, inp, n); });
  }
  void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) override {
    t_.timed("gelu_backward " + std::to_string(n), false,
             [&] { k_.gelu_backward(dinp, inp, dout, n); });
  }
  void add(T* out, const T* a, const T* b, size_t n) override {
    t_.timed("add " + std::to_string(n), false, [&] { k_.add(out, a, b, n); });
  }
  void dropout(T* out, const T* in, const DropoutKey& key, int B, int Tn, int C) override {
    t_.timed("dropout " + shape({B, Tn, C}), false, [&] { k_.dropout(out, in, key, B, Tn, C); });
  }
  double cross_entropy_forward(const T* logits, const int* targets, int N, int V) override {
    return t_.timed("cross_entropy_forward " + shape({N, V}), true,
                    [&] { return k_.cross_entropy_forward(logits, targets, N, V); });
  }
  double cross_entropy_forward_backward(T* logits, const int* targets, int N, int V,
                                        float grad_scale) override {
    return t_.timed("cross_entropy_forward_backward " + shape({N, V}), true, [&] {
      return k_.cross_entropy_forward_backward(logits, targets, N, V, grad_scale);
    });
  }
  void queue_cross_entropy_forward_backward(T* logits, const int* targets, int N, int V,
                                            float grad_scale) override {
    t_.timed("queue_cross_entropy_forward_backward " + shape({N, V}), false,
             [&] { k_.queue_cross_entropy_forward_backward(logits, targets, N, V, grad_scale); });
  }
  size_t classifier_scratch_elements(int N, int C, int V) const override {
    return k_.classifier_scratch_elements(N, C, V);
  }
  void queue_classifier_forward_backward(T* dinp, float* dwte, T* scratch, const T* inp,
                                         const T* wte, const int* targets, int N, int C, int V,
                                         float grad_scale, bool same_wte = false) override {
    t_.timed("queue_classifier_forward_backward " + shape({N, C}) + "->" + std::to_string(V), false,
             [&] {
               k_.queue_classifier_forward_backward(dinp, dwte, scratch, inp, wte, targets, N, C, V,
                                                    grad_scale, same_wte);
             });
  }
  double take_queued_loss() override {
    return t_.timed("take_queued_loss", true, [&] { return k_.take_queued_loss(); });
  }
  void queue_loss_copy(double* dst) override {
    t_.timed("queue_loss_copy", false, [&] { k_.queue_loss_copy(dst); });
  }

 private:
  TimedCompute& t_;
  LayerKernels<T>& k_;
};

}  // namespace

TimedCompute::TimedCompute(Compute& inner) : inner_(inner) {}
TimedCompute::~TimedCompute() = default;

void TimedCompute::finish(const std::string& name, std::chrono::steady_clock::time_point t0) {
  inner_.synchronize();
  Op& op = ops_[name];
  op.name = name;
  ++op.calls;
  op.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<TimedCompute::Op> TimedCompute::ops() const {
  std::vector<Op> v;
  for (const auto& [name, op] : ops_) v.push_back(op);
  std::sort(v.begin(), v.end(), [](const Op& a, const Op& b) { return a.seconds > b.seconds; });
  return v;
}

void TimedCompute::reset() {
  ops_.clear();
  counts_ = {};
  log_.clear();
}

void* TimedCompute::allocate(size_t bytes) {
  ++counts_.allocations;
  counts_.largest_allocation = std::max(counts_.largest_allocation, bytes);
  return inner_.allocate(bytes);
}
void TimedCompute::upload(void* dst, const void* host_src, size_t bytes) {
  timed("upload", false, [&] { inner_.upload(dst, host_src, bytes); });
}
void TimedCompute::download(void* host_dst, const void* src, size_t bytes) {
  timed("download", true, [&] { inner_.download(host_dst, src, bytes); });
}
void TimedCompute::copy(void* dst, const void* src, size_t bytes) {
  timed("copy", false, [&] { inner_.copy(dst, src, bytes); });
}
void TimedCompute::zero(void* dst, size_t bytes) {
  timed("zero", false, [&] { inner_.zero(dst, bytes); });
}
void TimedCompute::download_async(void* host_dst, const void* src, size_t bytes) {
  timed("download_async", false, [&] { inner_.download_async(host_dst, src, bytes); });
}
void TimedCompute::synchronize() {
  timed("synchronize", true, [&] { inner_.synchronize(); });
}

LayerKernels<float>& TimedCompute::layers_f32() {
  if (!f32_) f32_ = std::make_unique<TimedLayers<float>>(*this, inner_.layers_f32());
  return *f32_;
}
LayerKernels<bf16>& TimedCompute::layers_bf16() {
  if (!bf16_) bf16_ = std::make_unique<TimedLayers<bf16>>(*this, inner_.layers_bf16());
  return *bf16_;
}

void TimedCompute::sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float* A, int lda, const float* B, int ldb, float beta, float* C,
                         int ldc) {
  timed(std::string("sgemm ") + (trans_a ? 'T' : 'N') + (trans_b ? 'T' : 'N') + " " +
            shape({M, N, K}),
        false,
        [&] { inner_.sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); });
}
void TimedCompute::adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                                float lr, float beta1, float beta2, float eps, float weight_decay,
                                int64_t t, float grad_scale) {
  timed("adamw_update", false, [&] {
    inner_.adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  });
}
void TimedCompute::adamw_update_ranges(float* params, const float* grads, float* m, float* v,
                                       const std::vector<AdamWRange>& ranges, float lr, float beta1,
                                       float beta2, float eps, float weight_decay, int64_t t,
                                       float grad_scale, bf16* rounded, const AdamWGuard* guard) {
  timed("adamw_update_ranges", false, [&] {
    inner_.adamw_update_ranges(params, grads, m, v, ranges, lr, beta1, beta2, eps, weight_decay, t,
                               grad_scale, rounded, guard);
  });
}
void TimedCompute::replay() {
  timed("graph replay", false, [&] { inner_.replay(); });
}
double TimedCompute::sum_squares(const float* x, size_t n) {
  return timed("sum_squares", true, [&] { return inner_.sum_squares(x, n); });
}
void TimedCompute::sum_squares_into(double* dst, const float* x, size_t n) {
  timed("sum_squares_into", false, [&] { inner_.sum_squares_into(dst, x, n); });
}
void TimedCompute::add_inplace(float* acc, const float* x, size_t n) {
  timed("add_inplace f32", false, [&] { inner_.add_inplace(acc, x, n); });
}
void TimedCompute::add_inplace(float* acc, const bf16* x, size_t n) {
  timed("add_inplace bf16", false, [&] { inner_.add_inplace(acc, x, n); });
}
void TimedCompute::scale(float* x, size_t n, float s) {
  timed("scale", false, [&] { inner_.scale(x, n, s); });
}
void TimedCompute::cast(bf16* dst, const float* src, size_t n) {
  timed("cast f32->bf16", false, [&] { inner_.cast(dst, src, n); });
}
void TimedCompute::cast(float* dst, const bf16* src, size_t n) {
  timed("cast bf16->f32", false, [&] { inner_.cast(dst, src, n); });
}

}  // namespace rm

#include "kernels/cpu/cpu_compute.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kernels/cpu/bf16_layers.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/context_embedding.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/kernels.h"

namespace rm::cpu {
namespace {

// The float layers: the reference kernels of this folder, one call each.
class CpuF32Layers final : public LayerKernels<float> {
 public:
  void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                         int Tn, int C) override {
    cpu::embedding_forward(out, tokens, wte, wpe, B, Tn, C);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                          int Tn, int C) override {
    cpu::embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C);
  }
  void context_embedding_forward(float* x, const int* tokens, const float* emb, int B, int Tn,
                                 int K, int E) override {
    cpu::context_embedding_forward(x, tokens, emb, B, Tn, K, E);
  }
  void context_embedding_backward(float* demb, const float* dx, const int* tokens, int B, int Tn,
                                  int K, int E) override {
    cpu::context_embedding_backward(demb, dx, tokens, B, Tn, K, E);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override {
    cpu::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override {
    cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                      int C, int OC) override {
    cpu::linear_forward(out, inp, weight, bias, N, C, OC);
  }
  void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int C, int OC) override {
    cpu::linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int Tn, int C,
                         int H) override {
    cpu::attention_forward(out, att, qkv, B, Tn, C, H);
  }
  void attention_backward(float* dqkv, float* datt_scratch, const float* dout, const float* qkv,
                          const float* att, const float* /*out*/, int B, int Tn, int C,
                          int H) override {
    cpu::attention_backward(dqkv, datt_scratch, dout, qkv, att, B, Tn, C, H);
  }
  void gelu_forward(float* out, const float* inp, size_t n) override {
    cpu::gelu_forward(out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
    cpu::gelu_backward(dinp, inp, dout, n);
  }
  void add(float* out, const float* a, const float* b, size_t n) override {
    cpu::add(out, a, b, n);
  }
  void dropout(float* out, const float* in, const DropoutKey& key, int B, int Tn, int C) override {
    cpu::dropout(out, in, key, B, static_cast<size_t>(Tn) * C);
  }
  double cross_entropy_forward(const float* logits, const int* targets, int N, int V) override {
    return cpu::cross_entropy_forward(nullptr, logits, targets, N, V);
  }
  double cross_entropy_forward_backward(float* logits, const int* targets, int N, int V,
                                        float grad_scale) override {
    return cpu::cross_entropy_forward_backward(logits, targets, N, V, grad_scale);
  }
};

class CpuCompute final : public Compute {
 public:
  explicit CpuCompute(int threads) : bf16_(f32_) {
    if (threads > 0) set_num_threads(threads);
    threads_ = num_threads();
  }

  ComputeKind kind() const override { return ComputeKind::kCpu; }
  std::string describe() const override {
    return "cpu, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") + ", " +
           blas_description();
  }

  void* allocate(size_t bytes) override {
    // Page-aligned (and so 256-byte aligned), zero-filled: the zeroing is also the first touch,
    // made here at start-up rather than on the first step.
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    return p;
  }
  void release(void* memory) override { std::free(memory); }
  void* allocate_host(size_t bytes) override { return allocate(bytes); }
  void release_host(void* memory) override { std::free(memory); }
  void upload(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
  }
  void zero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
  void download_async(void* dst, const void* src, size_t bytes) override {
    copy(dst, src, bytes);
  }
  std::function<void()> downloads_fence() override {
    return [] {};
  }
  void synchronize() override {}

  LayerKernels<float>& layers_f32() override { return f32_; }
  LayerKernels<bf16>& layers_bf16() override { return bf16_; }

  void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) override {
    cpu::sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t,
                    float grad_scale) override {
    cpu::adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  }
  double sum_squares(const float* x, size_t n) override { return cpu::sum_squares(x, n); }
  void sum_squares_into(double* dst, const float* x, size_t n) override {
    *dst = cpu::sum_squares(x, n);
  }
  void add_inplace(float* acc, const float* x, size_t n) override { cpu::add_inplace(acc, x, n); }
  void add_inplace(float* acc, const bf16* x, size_t n) override { cpu::add_inplace(acc, x, n); }
  void scale(float* x, size_t n, float s) override { cpu::scale(x, n, s); }
  void cast(bf16* dst, const float* src, size_t n) override { cpu::cast(dst, src, n); }
  void cast(float* dst, const bf16* src, size_t n) override { cpu::cast(dst, src, n); }

 private:
  int threads_ = 1;
  CpuF32Layers f32_;
  Bf16EmulatedLayers bf16_;
};

}  // namespace

std::unique_ptr<Compute> make_cpu_compute(int threads) {
  return std::make_unique<CpuCompute>(threads);
}

}  // namespace rm::cpu

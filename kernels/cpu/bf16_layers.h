// bf16 layers on the CPU, emulated: bf16 storage, float math.
//
// Each kernel widens its bf16 inputs into float scratch (exact), runs the float kernel of the
// backend it wraps, and rounds each bf16 output once (kernels/bf16.h) -- the same rounding points
// as the CUDA kernels, which read bf16, compute in float and store bf16. So a bf16 job, with its
// casts, fp32 master weights and bf16 reductions, runs and is tested on every machine; it is no
// faster than fp32 here (the widening costs a pass over each operand), which is not its purpose.
//
// The scratch grows to the largest call and stays: after the first step nothing allocates.
#pragma once

#include <vector>

#include "kernels/layer_kernels.h"

namespace rm::cpu {

class Bf16EmulatedLayers final : public LayerKernels<bf16> {
 public:
  explicit Bf16EmulatedLayers(LayerKernels<float>& f32) : f32_(f32) {}

  void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int B,
                         int Tn, int C) override;
  void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int B,
                          int Tn, int C) override;
  void context_embedding_forward(bf16* x, const int* tokens, const bf16* emb, int B, int Tn, int K,
                                 int E) override;
  void context_embedding_backward(float* demb, const bf16* dx, const int* tokens, int B, int Tn,
                                  int K, int E) override;
  void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                         const bf16* bias, int N, int C) override;
  void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                          const bf16* inp, const bf16* weight, const float* mean,
                          const float* rstd, int N, int C) override;
  void linear_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N,
                      int C, int OC) override;
  void linear_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                       const bf16* inp, const bf16* weight, int N, int C, int OC) override;
  void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int Tn, int C,
                         int H) override;
  void attention_backward(bf16* dqkv, bf16* datt_scratch, const bf16* dout, const bf16* qkv,
                          const bf16* att, const bf16* out, int B, int Tn, int C,
                          int H) override;
  void gelu_forward(bf16* out, const bf16* inp, size_t n) override;
  void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n) override;
  void add(bf16* out, const bf16* a, const bf16* b, size_t n) override;
  void dropout(bf16* out, const bf16* in, const DropoutKey& key, int B, int Tn, int C) override;
  double cross_entropy_forward(const bf16* logits, const int* targets, int N, int V) override;
  double cross_entropy_forward_backward(bf16* logits_then_dlogits, const int* targets, int N,
                                        int V, float grad_scale) override;

 private:
  static constexpr int kSlots = 6;
  float* scratch(int slot, size_t n);                   // uninitialised float[n]
  float* widen(int slot, const bf16* src, size_t n);    // float copy of src[0, n)
  static void round(bf16* dst, const float* src, size_t n);

  LayerKernels<float>& f32_;
  std::vector<float> slots_[kSlots];
};

}  // namespace rm::cpu

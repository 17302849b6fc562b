// The layer kernels of the cuda backend (kernels/layer_kernels.h) for T = float or bf16: each
// method checks its shapes, then queues the kernels of this folder on the context's compute
// stream. Only the cross-entropy losses wait (they download their result). Attention takes the
// flash kernels where they apply (attention_buffers says which buffers that needs), or there
// cuDNN's fused attention unless RM_CUDNN_ATTENTION=0 (cudnn_sdpa.h; the same buffers).
#pragma once

#include "kernels/cuda/cuda_context.h"
#include "kernels/layer_kernels.h"

namespace rm::cuda {

template <typename T>
class CudaLayers final : public LayerKernels<T> {
 public:
  explicit CudaLayers(CudaContext& ctx) : ctx_(ctx) {}

  void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn,
                         int C) override;
  void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                          int C) override;
  void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K,
                                 int E) override;
  void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                  int E) override;
  void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                         const T* bias, int N, int C) override;
  void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                          const T* weight, const float* mean, const float* rstd, int N,
                          int C) override;
  void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a, const T* b,
                                  const T* weight, const T* bias, int N, int C) override;
  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                      int OC) override;
  void linear_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                       const T* weight, int N, int C, int OC) override;
  // bf16: the bias, GELU and its derivative, and the bias gradient in cuBLASLt's epilogues
  // (gemm.h).
  void linear_gelu_forward(T* out, T* pre, const T* inp, const T* weight, const T* bias, int N,
                           int C, int OC) override;
  void linear_backward_into_gelu(T* dpre, float* dweight, float* dbias, const T* dout,
                                 const T* inp, const T* weight, const T* pre, int N, int C,
                                 int OC) override;
  void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) override;
  void attention_backward(T* dqkv, T* datt_scratch, const T* dout, const T* qkv, const T* att,
                          const T* out, int B, int Tn, int C, int H) override;
  // bf16 with a head size flash_attention_supported(): the flash kernels' log-sum-exp and row
  // sums (flash_attention.h); otherwise the materialised [B,H,Tn,Tn] (cuda/attention.h).
  AttentionBuffers attention_buffers(int B, int Tn, int C, int H) const override;
  void gelu_forward(T* out, const T* inp, size_t n) override;
  void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) override;
  void add(T* out, const T* a, const T* b, size_t n) override;
  void dropout(T* out, const T* in, const DropoutKey& key, int B, int Tn, int C) override;
  double cross_entropy_forward(const T* logits, const int* targets, int N, int V) override;
  double cross_entropy_forward_backward(T* logits_then_dlogits, const int* targets, int N, int V,
                                        float grad_scale) override;
  // The total lives in the context's DeviceResults (one per GPU context, shared by the float
  // and bf16 layers); take_queued_loss() is the only download.
  void queue_cross_entropy_forward_backward(T* logits_then_dlogits, const int* targets, int N,
                                            int V, float grad_scale) override;
  double take_queued_loss() override;
  void queue_loss_copy(double* dst) override;
  // The vocabulary padded to a multiple of 128 inside the scratch (gemm_args.h: padded_vocab):
  // the padded copy of wte first, then the logits, so that a call with same_wte (a later chunk,
  // fewer rows) finds the copy where the call before left it.
  size_t classifier_scratch_elements(int N, int C, int V) const override;
  void queue_classifier_forward_backward(T* dinp, float* dwte, T* scratch, const T* inp,
                                         const T* wte, const int* targets, int N, int C, int V,
                                         float grad_scale, bool same_wte = false) override;

 private:
  // The queued cross-entropy over rows ld >= V elements apart.
  void queue_loss(T* logits_then_dlogits, const int* targets, int N, int V, int ld,
                  float grad_scale);
  LtGemm* lt();  // the context's cuBLASLt for bf16, null for fp32
  // The linear backward's scratch (gemm.h), null without a bias gradient.
  float* linear_scratch(float* dbias, int N, int OC);
  // Whether attention takes the flash kernels (T = bf16 and a supported head size).
  static bool use_flash(int C, int H);
  // Downloads the cross-entropy status; throws std::out_of_range for a target >= V.
  double finish_cross_entropy(const int* targets, int N, int V);

  CudaContext& ctx_;
};

extern template class CudaLayers<float>;
extern template class CudaLayers<bf16>;

}  // namespace rm::cuda

#include "kernels/cuda/cuda_layers.h"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/classifier_plan.h"
#include "kernels/cuda/context_embedding.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/launch_util.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/residual.h"
#if RM_HAVE_CUDNN
#include "kernels/cuda/cudnn_sdpa.h"
#endif

namespace rm::cuda {
namespace {

// Negative sizes are rejected before anything is queued (the kernels treat <= 0 as empty).
void check_sizes(const char* fn, std::initializer_list<int> sizes) {
  for (int s : sizes) {
    if (s < 0) {
      throw std::invalid_argument(std::string("rm::cuda::") + fn + ": negative size " +
                                  std::to_string(s));
    }
  }
}

}  // namespace

template <typename T>
void CudaLayers<T>::embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B,
                                      int Tn, int C) {
  check_sizes("embedding_forward", {B, Tn, C});
  cuda::embedding_forward(out, tokens, wte, wpe, B, Tn, C, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens,
                                       int B, int Tn, int C) {
  check_sizes("embedding_backward", {B, Tn, C});
  void* scratch = ctx_.sort_scratch(embedding_backward_scratch_bytes(B * Tn));
  cuda::embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C, scratch, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn,
                                              int K, int E) {
  check_sizes("context_embedding_forward", {B, Tn, K, E});
  cuda::context_embedding_forward(x, tokens, emb, B, Tn, K, E, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::context_embedding_backward(float* demb, const T* dx, const int* tokens, int B,
                                               int Tn, int K, int E) {
  check_sizes("context_embedding_backward", {B, Tn, K, E});
  cuda::context_embedding_backward(demb, dx, tokens, B, Tn, K, E, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::layernorm_forward(T* out, float* mean, float* rstd, const T* inp,
                                      const T* weight, const T* bias, int N, int C) {
  check_sizes("layernorm_forward", {N, C});
  cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a,
                                               const T* b, const T* weight, const T* bias, int N,
                                               int C) {
  check_sizes("residual_layernorm_forward", {N, C});
  cuda::residual_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, N, C, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                       const T* inp, const T* weight, const float* mean,
                                       const float* rstd, int N, int C) {
  check_sizes("layernorm_backward", {N, C});
  float* partials = ctx_.column_scratch(
      layernorm_backward_partial_floats(static_cast<size_t>(N), static_cast<size_t>(C)));
  cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, partials,
                           ctx_.stream());
}

template <typename T>
LtGemm* CudaLayers<T>::lt() {
  // cuBLASLt's epilogues for bf16; fp32 keeps cuBLAS's GEMMs (and TF32 where allowed).
  return std::is_same_v<T, bf16> ? &ctx_.lt() : nullptr;
}

template <typename T>
float* CudaLayers<T>::linear_scratch(float* dbias, int N, int OC) {
  return dbias != nullptr && N > 0 && OC > 0 ? ctx_.column_scratch(linear_scratch_floats(N, OC))
                                             : nullptr;
}

template <typename T>
void CudaLayers<T>::linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N,
                                   int C, int OC) {
  cuda::linear_forward(ctx_.blas(), lt(), out, inp, weight, bias, N, C, OC, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::linear_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                    const T* inp, const T* weight, int N, int C, int OC) {
  cuda::linear_backward(ctx_.blas(), lt(), dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                        linear_scratch(dbias, N, OC), ctx_.stream(), ctx_.bias_side());
}

template <typename T>
void CudaLayers<T>::linear_gelu_forward(T* out, T* pre, const T* inp, const T* weight,
                                        const T* bias, int N, int C, int OC) {
  cuda::linear_gelu_forward(ctx_.blas(), lt(), out, pre, inp, weight, bias, N, C, OC,
                            ctx_.stream());
}

template <typename T>
void CudaLayers<T>::linear_backward_into_gelu(T* dpre, float* dweight, float* dbias,
                                              const T* dout, const T* inp, const T* weight,
                                              const T* pre, int N, int C, int OC) {
  cuda::linear_backward_into_gelu(ctx_.blas(), lt(), dpre, dweight, dbias, dout, inp, weight, pre,
                                  N, C, OC, linear_scratch(dbias, N, OC), ctx_.stream(),
                                  ctx_.bias_side());
}

template <typename T>
bool CudaLayers<T>::use_flash(int C, int H) {
  return flash_attention_supported(std::is_same_v<T, bf16>, C, H);
}

template <typename T>
AttentionBuffers CudaLayers<T>::attention_buffers(int B, int Tn, int C, int H) const {
  if (!use_flash(C, H)) return materialised_attention_buffers(B, Tn, H);
  return flash_attention_buffers(B, Tn, H);
}

template <typename T>
void CudaLayers<T>::attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) {
  check_sizes("attention_forward", {B, Tn, C, H});
  if constexpr (std::is_same_v<T, bf16>) {
    if (use_flash(C, H)) {
#if RM_HAVE_CUDNN
      // cuDNN only where the flash kernels apply: the same buffers (attention_buffers) serve.
      CudnnAttention* cudnn = ctx_.cudnn_attention();
      if (cudnn != nullptr && cudnn->takes(B, Tn, C, H) &&
          cudnn->forward(out, reinterpret_cast<float*>(att), qkv, B, Tn, C, H)) {
        return;
      }
#endif
      flash_attention_forward(out, att, qkv, B, Tn, C, H, ctx_.stream());
      return;
    }
  }
  const size_t n = attention_scratch_floats<T>(Tn, H);
  float* scores = n > 0 ? ctx_.attention_scratch(n) : nullptr;
  cuda::attention_forward(ctx_.blas(), out, att, qkv, B, Tn, C, H, scores, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::attention_backward(T* dqkv, T* datt_scratch, const T* dout, const T* qkv,
                                       const T* att, const T* out, int B, int Tn, int C, int H) {
  check_sizes("attention_backward", {B, Tn, C, H});
  if constexpr (std::is_same_v<T, bf16>) {
    if (use_flash(C, H)) {
#if RM_HAVE_CUDNN
      CudnnAttention* cudnn = ctx_.cudnn_attention();
      if (cudnn != nullptr && cudnn->takes(B, Tn, C, H)) {  // as the forward decided
        cudnn->backward(dqkv, reinterpret_cast<float*>(datt_scratch), dout, qkv,
                        reinterpret_cast<const float*>(att), out, B, Tn, C, H);
        return;
      }
#endif
      flash_attention_backward(dqkv, datt_scratch, dout, qkv, att, out, B, Tn, C, H, ctx_.stream());
      return;
    }
  }
  (void)out;
  const size_t n = attention_scratch_floats<T>(Tn, H);
  float* scores = n > 0 ? ctx_.attention_scratch(n) : nullptr;
  cuda::attention_backward(ctx_.blas(), dqkv, datt_scratch, dout, qkv, att, B, Tn, C, H, scores,
                           ctx_.stream());
}

template <typename T>
void CudaLayers<T>::gelu_forward(T* out, const T* inp, size_t n) {
  cuda::gelu_forward(out, inp, n, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
  cuda::gelu_backward(dinp, inp, dout, n, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::add(T* out, const T* a, const T* b, size_t n) {
  cuda::add(out, a, b, n, ctx_.stream());
}

template <typename T>
void CudaLayers<T>::dropout(T* out, const T* in, const DropoutKey& key, int B, int Tn, int C) {
  check_sizes("dropout", {B, Tn, C});
  cuda::dropout(out, in, key, B, static_cast<size_t>(Tn) * C, ctx_.stream());
}

template <typename T>
double CudaLayers<T>::cross_entropy_forward(const T* logits, const int* targets, int N, int V) {
  check_sizes("cross_entropy_forward", {N, V});
  cuda::cross_entropy_forward(&ctx_.results()->cross_entropy,
                              ctx_.loss_scratch(static_cast<size_t>(N)), logits, targets, N, V,
                              ctx_.stream());
  return finish_cross_entropy(targets, N, V);
}

template <typename T>
double CudaLayers<T>::cross_entropy_forward_backward(T* logits_then_dlogits, const int* targets,
                                                     int N, int V, float grad_scale) {
  check_sizes("cross_entropy_forward_backward", {N, V});
  cuda::cross_entropy_forward_backward(
      &ctx_.results()->cross_entropy, ctx_.loss_scratch(static_cast<size_t>(N)),
      logits_then_dlogits, targets, N, V, V, grad_scale, ctx_.stream());
  return finish_cross_entropy(targets, N, V);
}

template <typename T>
void CudaLayers<T>::queue_cross_entropy_forward_backward(T* logits_then_dlogits, const int* targets,
                                                         int N, int V, float grad_scale) {
  check_sizes("queue_cross_entropy_forward_backward", {N, V});
  queue_loss(logits_then_dlogits, targets, N, V, V, grad_scale);
}

template <typename T>
void CudaLayers<T>::queue_loss(T* logits_then_dlogits, const int* targets, int N, int V, int ld,
                               float grad_scale) {
  cuda::cross_entropy_forward_backward(
      &ctx_.results()->cross_entropy, ctx_.loss_scratch(static_cast<size_t>(N)),
      logits_then_dlogits, targets, N, V, ld, grad_scale, ctx_.stream());
  cuda::accumulate_cross_entropy(&ctx_.results()->queued_cross_entropy,
                                 &ctx_.results()->cross_entropy, targets, N, ctx_.stream());
}

template <typename T>
size_t CudaLayers<T>::classifier_scratch_elements(int N, int C, int V) const {
  return cuda::classifier_scratch_elements(N, C, V);
}

template <typename T>
void CudaLayers<T>::queue_classifier_forward_backward(T* dinp, float* dwte, T* scratch,
                                                      const T* inp, const T* wte,
                                                      const int* targets, int N, int C, int V,
                                                      float grad_scale, bool same_wte) {
  check_sizes("queue_classifier_forward_backward", {N, C, V});
  const int Vp = padded_vocab(V);
  T* const wte_p = scratch;
  T* const logits = scratch + static_cast<size_t>(Vp) * C;
  const RowMajorGemm forward = linear_forward_gemm(N, C, Vp, false),
                     dinp_gemm = linear_dinp_gemm(N, C, Vp);
  const SplitGemm dwte_gemms = classifier_dweight_gemms(N, C, V, Vp);
  to_cublas(forward);  // all validated before anything is queued
  to_cublas(dinp_gemm);
  to_cublas(dwte_gemms.head);
  to_cublas(dwte_gemms.tail);
  // The padded copy of wte (77 MB at GPT-2's shape, ~0.05 ms): made by the first call of each
  // backward, because the parameters change every step and ZeRO-3 hands a different gathered
  // buffer each time; the later row chunks of the same backward (same_wte) reuse it.
  this->note_classifier_call(scratch, wte, C, V, same_wte);
  if (!same_wte) {
    const size_t row_bytes = static_cast<size_t>(C) * sizeof(T);
    RM_CUDA_CHECK(cudaMemcpyAsync(wte_p, wte, static_cast<size_t>(V) * row_bytes,
                                  cudaMemcpyDeviceToDevice, ctx_.stream()),
                  kThrow);
    RM_CUDA_CHECK(cudaMemsetAsync(wte_p + static_cast<size_t>(V) * C, 0,
                                  static_cast<size_t>(Vp - V) * row_bytes, ctx_.stream()),
                  kThrow);
  }
  gemm(ctx_.blas(), forward, inp, wte_p, logits);
  queue_loss(logits, targets, N, V, Vp, grad_scale);
  gemm(ctx_.blas(), dinp_gemm, logits, wte_p, dinp);
  const size_t split = static_cast<size_t>(dwte_gemms.split);
  gemm(ctx_.blas(), dwte_gemms.head, logits, inp, dwte);
  gemm(ctx_.blas(), dwte_gemms.tail, logits + split, inp, dwte + split * C);
}

template <typename T>
double CudaLayers<T>::take_queued_loss() {
  CrossEntropyTotal total;
  CrossEntropyTotal* const device_total = &ctx_.results()->queued_cross_entropy;
  ctx_.fetch(&total, device_total, sizeof(total));
  RM_CUDA_CHECK(cudaMemsetAsync(device_total, 0, sizeof(total), ctx_.stream()), kThrow);
  if (total.bad != 0) {
    throw std::out_of_range("rm::cuda::cross_entropy: target " + std::to_string(total.bad_target) +
                            " of row " + std::to_string(total.bad_row) +
                            " is not below the vocabulary");
  }
  return total.loss;
}

template <typename T>
void CudaLayers<T>::queue_loss_copy(double* dst) {
  cuda::copy_cross_entropy_total(dst, &ctx_.results()->queued_cross_entropy, ctx_.stream());
}

template <typename T>
double CudaLayers<T>::finish_cross_entropy(const int* targets, int N, int V) {
  CrossEntropyStatus status;
  ctx_.fetch(&status, &ctx_.results()->cross_entropy, sizeof(status));
  if (status.bad_row < N) {
    int target = 0;
    ctx_.fetch(&target, targets + status.bad_row, sizeof(target));
    throw std::out_of_range("rm::cuda::cross_entropy: target " + std::to_string(target) +
                            " of row " + std::to_string(status.bad_row) +
                            " is not below V=" + std::to_string(V));
  }
  return status.loss;
}

template class CudaLayers<float>;
template class CudaLayers<bf16>;

}  // namespace rm::cuda

// The layer kernels of one storage type T (float or bf16), as a backend implements them.
//
// Semantics are those of the CPU reference kernels (kernels/cpu/kernels.h and the header of
// each kernel there), whatever the backend:
//  - Row-major, contiguous, shapes passed explicitly (B batch, Tn time, C channels, H heads,
//    V vocab, N rows). Weights use the nn.Linear layout W[out, in].
//  - Every pointer is memory of the backend (Compute::allocate): token ids included.
//  - Parameters and activations (and activation gradients) are T; parameter gradients,
//    layernorm statistics and losses are float. Parameter gradients ACCUMULATE (+=); input
//    gradients are OVERWRITTEN, except layernorm_backward's dinp, which ADDS (it is the
//    residual stream's gradient).
//  - With T = bf16 every kernel reads bf16, computes in float and rounds each output once
//    (kernels/bf16.h), so the two backends differ in summation order, and where a backend fuses
//    two of these calls: the CUDA backend's linear_gelu_forward and linear_backward_into_gelu
//    round once from float, the CPU emulation's defaults (two calls) round the pre-activation,
//    and its gradient, in between.
//  - Calls run in order on the backend's compute stream; only the losses return to the host
//    (and so wait for the work before them).
#pragma once

#include <cstddef>
#include <stdexcept>

#include "kernels/bf16.h"
#include "kernels/dropout_mask.h"

namespace rm {

// Sizes, in elements of the storage type, of attention's kept state and backward scratch.
struct AttentionBuffers {
  size_t saved = 0;    // attention_forward's att
  size_t scratch = 0;  // attention_backward's datt_scratch
};
// The probabilities [B,H,Tn,Tn] and their gradient, as the cpu backend keeps them.
inline AttentionBuffers materialised_attention_buffers(size_t B, size_t Tn, size_t H) {
  const size_t n = B * H * Tn * Tn;
  return {n, n};
}

template <typename T>
class LayerKernels {
 public:
  virtual ~LayerKernels() = default;

  // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; wpe may be null.
  virtual void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B,
                                 int Tn, int C) = 0;
  // dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += sum_b dout[b,t,:] (dwpe may be null).
  virtual void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B,
                                  int Tn, int C) = 0;

  // The MLP model's input: x[b,t,j*E:(j+1)*E] = emb[tokens[b, t-K+1+j]], zeros where that
  // position is before the start of the sequence. x is [B*Tn, K*E], emb [V, E].
  virtual void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn,
                                         int K, int E) = 0;
  // demb[tokens[b, t-K+1+j]] += dx[b,t,j*E:(j+1)*E] (ACCUMULATED, deterministic).
  virtual void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B,
                                          int Tn, int K, int E) = 0;

  // LayerNorm over the last dimension, eps 1e-5; mean and rstd [N] saved for the backward
  // (either may be null when no backward follows).
  virtual void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                 const T* bias, int N, int C) = 0;
  virtual void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                  const T* inp, const T* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  // The residual add and the layernorm that reads its result, in one pass where the backend
  // fuses them (cuda: a and b read once, the sum written once, no second launch):
  // sum = a + b rounded to T (as add()), then out = layernorm(sum) (as layernorm_forward()),
  // the same bits as the two calls, which are the default. [N, C]; sum may alias a or b.
  virtual void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a,
                                          const T* b, const T* weight, const T* bias, int N,
                                          int C) {
    add(sum, a, b, static_cast<size_t>(N) * static_cast<size_t>(C));
    layernorm_forward(out, mean, rstd, sum, weight, bias, N, C);
  }

  // out[N,OC] = inp[N,C] W^T + bias (bias may be null).
  virtual void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                              int OC) = 0;
  // dinp = dout W (skipped when null); dweight += dout^T inp; dbias += sum_n dout (may be null).
  virtual void linear_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                               const T* weight, int N, int C, int OC) = 0;

  // The MLP's first Linear and its GELU in one call: pre = inp W^T + bias and out = gelu(pre),
  // both [N, OC] (pre is kept for the backward). By default the two calls; cuda fuses the GELU
  // into the GEMM's epilogue (bf16), rounding pre and out each once from the same fp32 value.
  virtual void linear_gelu_forward(T* out, T* pre, const T* inp, const T* weight, const T* bias,
                                   int N, int C, int OC) {
    linear_forward(pre, inp, weight, bias, N, C, OC);
    gelu_forward(out, pre, static_cast<size_t>(N) * OC);
  }
  // linear_backward of a Linear whose input was gelu(pre): dpre = gelu'(pre) * (dout W)
  // OVERWRITTEN ([N, C], the gradient of pre, not of the GELU's output); dweight and dbias as
  // linear_backward (inp is the GELU's output). By default the two calls, the GELU's backward in
  // place; cuda fuses it into the input-gradient GEMM's epilogue (bf16).
  virtual void linear_backward_into_gelu(T* dpre, float* dweight, float* dbias, const T* dout,
                                         const T* inp, const T* weight, const T* pre, int N, int C,
                                         int OC) {
    linear_backward(dpre, dweight, dbias, dout, inp, weight, N, C, OC);
    gelu_backward(dpre, pre, dpre, static_cast<size_t>(N) * C);
  }

  // Causal self-attention core over qkv[B,Tn,3C]; out[B,Tn,C]. att keeps what the backward
  // needs: by default the probabilities [B,H,Tn,Tn] (only j <= i defined); a backend may keep
  // less (attention_buffers below), and att is then only for its own backward.
  virtual void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) = 0;
  // dqkv OVERWRITTEN, from the forward's att and out (a backend may use either); datt_scratch
  // has attention_buffers().scratch elements.
  virtual void attention_backward(T* dqkv, T* datt_scratch, const T* dout, const T* qkv,
                                  const T* att, const T* out, int B, int Tn, int C, int H) = 0;
  // The elements of T that att and datt_scratch need for calls of up to B sequences of up to Tn
  // tokens (a smaller call fits in them too). Default: [B,H,Tn,Tn] each.
  virtual AttentionBuffers attention_buffers(int B, int Tn, int C, int H) const {
    (void)C;
    return materialised_attention_buffers(B, Tn, H);
  }

  // GELU (tanh approximation). out may alias inp, dinp may alias dout.
  virtual void gelu_forward(T* out, const T* inp, size_t n) = 0;
  virtual void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) = 0;

  // out = a + b (out may alias a or b exactly).
  virtual void add(T* out, const T* a, const T* b, size_t n) = 0;

  // Dropout over [B, Tn, C]: out = in * key.scale where the element is kept, else 0, rounded once
  // to T; the masks are kernels/dropout_mask.h's, the same bits on every backend. out may alias
  // in exactly. The same call on a gradient with the same key is dropout's backward.
  virtual void dropout(T* out, const T* in, const DropoutKey& key, int B, int Tn, int C) = 0;

  // Softmax cross-entropy over logits[N,V]; targets < 0 are ignored. Returns the loss SUM.
  // The forward_backward form OVERWRITES the logits with (softmax - onehot) * grad_scale.
  virtual double cross_entropy_forward(const T* logits, const int* targets, int N, int V) = 0;
  virtual double cross_entropy_forward_backward(T* logits_then_dlogits, const int* targets, int N,
                                                int V, float grad_scale) = 0;

  // cross_entropy_forward_backward that returns nothing, so nothing waits: the loss sum is added
  // to a running total the backend keeps (device memory on cuda), in call order.
  // take_queued_loss() returns that total and resets it: one host synchronisation for all the
  // micro-batches of a step, at its end, instead of one per micro-batch between its forward and
  // its backward. A target >= V throws std::out_of_range from take_queued_loss() on cuda (the
  // dlogits of that call are then untouched); on the cpu from the queueing call, and the total
  // is reset. One total per backend, whichever model queues into it.
  virtual void queue_cross_entropy_forward_backward(T* logits_then_dlogits, const int* targets,
                                                    int N, int V, float grad_scale) {
    double loss = 0;
    try {
      loss = cross_entropy_forward_backward(logits_then_dlogits, targets, N, V, grad_scale);
    } catch (...) {
      queued_loss_ = 0;
      throw;
    }
    queued_loss_ += loss;
  }
  virtual double take_queued_loss() {
    const double total = queued_loss_;
    queued_loss_ = 0;
    return total;
  }
  // The running total so far into *dst, memory of this backend, in stream order and without a
  // wait (a training step's StepScalars::loss_sum, which its optimizer update reads on the
  // device); NaN where a queued call found a target >= V. The total is kept: take_queued_loss()
  // still returns it. By default (memory the host addresses) a plain store.
  virtual void queue_loss_copy(double* dst) { *dst = queued_loss_; }

  // A training step's classifier (a tied LM head, no bias) and its loss in one call:
  // logits = inp wte^T over [N, V], queue_cross_entropy_forward_backward over them, then
  // dinp = dlogits wte (OVERWRITTEN) and dwte += dlogits^T inp. `scratch` has
  // classifier_scratch_elements(N, C, V) elements of T and holds the logits and whatever else
  // the backend needs in between (cuda pads the vocabulary there); afterwards its content is
  // the backend's. By default the three calls above, the logits [N, V] in scratch.
  // same_wte: the caller promises that the call before this one was to the same scratch, wte,
  // C and V, and that wte has not changed since (the second and later row chunks of one
  // backward, model.classifier_chunk_tokens): the backend may reuse what that call left in the
  // scratch (cuda: its padded copy of wte, 77 MB at GPT-2's shape, made once a backward instead
  // of once a chunk). Every backend checks the promise as far as pointers and shapes go:
  // same_wte after a call with another scratch, wte, C or V (or none) throws std::logic_error
  // before anything is queued.
  virtual size_t classifier_scratch_elements(int N, int C, int V) const {
    (void)C;
    return static_cast<size_t>(N) * static_cast<size_t>(V);
  }
  virtual void queue_classifier_forward_backward(T* dinp, float* dwte, T* scratch, const T* inp,
                                                 const T* wte, const int* targets, int N, int C,
                                                 int V, float grad_scale, bool same_wte = false) {
    note_classifier_call(scratch, wte, C, V, same_wte);
    linear_forward(scratch, inp, wte, nullptr, N, C, V);
    queue_cross_entropy_forward_backward(scratch, targets, N, V, grad_scale);
    linear_backward(dinp, dwte, nullptr, scratch, inp, wte, N, C, V);
  }

 protected:
  // A classifier call's same_wte promise checked against the call before it (std::logic_error
  // when broken), then this call noted as the one before the next.
  void note_classifier_call(const T* scratch, const T* wte, int C, int V, bool same_wte) {
    const ClassifierCall now{scratch, wte, C, V};
    if (same_wte && !(last_classifier_call_ == now)) {
      throw std::logic_error(
          "queue_classifier_forward_backward: same_wte, but the call before had another "
          "scratch, wte or shape (or there was none)");
    }
    last_classifier_call_ = now;
  }

 private:
  struct ClassifierCall {
    const T* scratch = nullptr;
    const T* wte = nullptr;
    int C = 0, V = 0;
    bool operator==(const ClassifierCall& o) const {
      return scratch == o.scratch && wte == o.wte && C == o.C && V == o.V;
    }
  };
  double queued_loss_ = 0;  // the default queue's total (host memory)
  ClassifierCall last_classifier_call_;
};

}  // namespace rm

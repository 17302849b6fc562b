#include "kernels/cpu/bf16_layers.h"

#include "kernels/cpu/cast.h"
#include "kernels/cpu/context_embedding.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/parallel_util.h"
#include "kernels/elementwise_math.h"

namespace rm::cpu {

using detail::row_offset;

float* Bf16EmulatedLayers::scratch(int slot, size_t n) {
  std::vector<float>& s = slots_[slot];
  if (s.size() < n) s.resize(n);
  return s.data();
}

float* Bf16EmulatedLayers::widen(int slot, const bf16* src, size_t n) {
  float* dst = scratch(slot, n);
  cast(dst, src, n);
  return dst;
}

void Bf16EmulatedLayers::round(bf16* dst, const float* src, size_t n) { cast(dst, src, n); }

void Bf16EmulatedLayers::embedding_forward(bf16* out, const int* tokens, const bf16* wte,
                                           const bf16* wpe, int B, int Tn, int C) {
  const int N = B * Tn;
#pragma omp parallel for schedule(static) if (static_cast<size_t>(N) * C >= \
                                                  detail::kMinParallelElems)
  for (int n = 0; n < N; ++n) {
    bf16* o = out + row_offset(n, C);
    const bf16* e = wte + row_offset(tokens[n], C);
    const bf16* p = wpe != nullptr ? wpe + row_offset(n % Tn, C) : nullptr;
    for (int c = 0; c < C; ++c) o[c] = to_bf16(to_float(e[c]) + (p ? to_float(p[c]) : 0.0f));
  }
}

void Bf16EmulatedLayers::embedding_backward(float* dwte, float* dwpe, const bf16* dout,
                                            const int* tokens, int B, int Tn, int C) {
  const size_t NC = static_cast<size_t>(B) * Tn * C;
  f32_.embedding_backward(dwte, dwpe, widen(0, dout, NC), tokens, B, Tn, C);
}

void Bf16EmulatedLayers::context_embedding_forward(bf16* x, const int* tokens, const bf16* emb,
                                                   int B, int Tn, int K, int E) {
  cpu::context_embedding_forward(x, tokens, emb, B, Tn, K, E);
}

void Bf16EmulatedLayers::context_embedding_backward(float* demb, const bf16* dx,
                                                    const int* tokens, int B, int Tn, int K,
                                                    int E) {
  cpu::context_embedding_backward(demb, dx, tokens, B, Tn, K, E);
}

void Bf16EmulatedLayers::layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                                           const bf16* weight, const bf16* bias, int N, int C) {
  const size_t NC = static_cast<size_t>(N) * C;
  float* o = scratch(0, NC);
  f32_.layernorm_forward(o, mean, rstd, widen(1, inp, NC), widen(2, weight, C),
                         widen(3, bias, C), N, C);
  round(out, o, NC);
}

void Bf16EmulatedLayers::layernorm_backward(bf16* dinp, float* dweight, float* dbias,
                                            const bf16* dout, const bf16* inp, const bf16* weight,
                                            const float* mean, const float* rstd, int N, int C) {
  const size_t NC = static_cast<size_t>(N) * C;
  float* di = widen(0, dinp, NC);  // accumulated into, then rounded once
  f32_.layernorm_backward(di, dweight, dbias, widen(1, dout, NC), widen(2, inp, NC),
                          widen(3, weight, C), mean, rstd, N, C);
  round(dinp, di, NC);
}

void Bf16EmulatedLayers::linear_forward(bf16* out, const bf16* inp, const bf16* weight,
                                        const bf16* bias, int N, int C, int OC) {
  const size_t NOC = static_cast<size_t>(N) * OC;
  float* o = scratch(0, NOC);
  f32_.linear_forward(o, widen(1, inp, static_cast<size_t>(N) * C),
                      widen(2, weight, static_cast<size_t>(OC) * C),
                      bias != nullptr ? widen(3, bias, OC) : nullptr, N, C, OC);
  round(out, o, NOC);
}

void Bf16EmulatedLayers::linear_backward(bf16* dinp, float* dweight, float* dbias,
                                         const bf16* dout, const bf16* inp, const bf16* weight,
                                         int N, int C, int OC) {
  const size_t NC = static_cast<size_t>(N) * C;
  float* di = dinp != nullptr ? scratch(0, NC) : nullptr;
  f32_.linear_backward(di, dweight, dbias, widen(1, dout, static_cast<size_t>(N) * OC),
                       widen(2, inp, NC), widen(3, weight, static_cast<size_t>(OC) * C), N, C, OC);
  if (dinp != nullptr) round(dinp, di, NC);
}

void Bf16EmulatedLayers::attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int Tn,
                                           int C, int H) {
  const size_t NC = static_cast<size_t>(B) * Tn * C;
  const size_t A = static_cast<size_t>(B) * H * Tn * Tn;
  float* o = scratch(0, NC);
  float* a = scratch(1, A);
  f32_.attention_forward(o, a, widen(2, qkv, 3 * NC), B, Tn, C, H);
  round(out, o, NC);
  round(att, a, A);  // the unspecified (j > i) entries too: they are never read
}

void Bf16EmulatedLayers::attention_backward(bf16* dqkv, bf16* /*datt_scratch*/, const bf16* dout,
                                            const bf16* qkv, const bf16* att,
                                            const bf16* /*out*/, int B, int Tn, int C, int H) {
  const size_t NC = static_cast<size_t>(B) * Tn * C;
  const size_t A = static_cast<size_t>(B) * H * Tn * Tn;
  float* dq = scratch(0, 3 * NC);
  f32_.attention_backward(dq, scratch(1, A), widen(2, dout, NC), widen(3, qkv, 3 * NC),
                          widen(4, att, A), nullptr, B, Tn, C, H);
  round(dqkv, dq, 3 * NC);
}

void Bf16EmulatedLayers::gelu_forward(bf16* out, const bf16* inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(gelu_tanh(to_float(inp[i])));
}

void Bf16EmulatedLayers::gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n) {
#pragma omp parallel for schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) {
    dinp[i] = to_bf16(gelu_tanh_grad(to_float(inp[i])) * to_float(dout[i]));
  }
}

void Bf16EmulatedLayers::add(bf16* out, const bf16* a, const bf16* b, size_t n) {
#pragma omp parallel for schedule(static) if (n >= detail::kMinParallelElems)
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

void Bf16EmulatedLayers::dropout(bf16* out, const bf16* in, const DropoutKey& key, int B, int Tn,
                                 int C) {
  cpu::dropout(out, in, key, B, static_cast<size_t>(Tn) * C);  // bf16 in and out: no widening
}

double Bf16EmulatedLayers::cross_entropy_forward(const bf16* logits, const int* targets, int N,
                                                 int V) {
  return f32_.cross_entropy_forward(widen(0, logits, static_cast<size_t>(N) * V), targets, N, V);
}

double Bf16EmulatedLayers::cross_entropy_forward_backward(bf16* logits_then_dlogits,
                                                          const int* targets, int N, int V,
                                                          float grad_scale) {
  const size_t NV = static_cast<size_t>(N) * V;
  float* l = widen(0, logits_then_dlogits, NV);
  const double loss = f32_.cross_entropy_forward_backward(l, targets, N, V, grad_scale);
  round(logits_then_dlogits, l, NV);
  return loss;
}

}  // namespace rm::cpu

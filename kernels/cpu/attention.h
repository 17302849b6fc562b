// Causal multi-head self-attention core (no projections), GPT-2 layout.
//
// qkv[B,T,3C] holds q | k | v for each token; head h owns columns h*hs .. h*hs+hs-1 of each of
// the three (hs = C/H). out[B,T,C] has the heads side by side. Scale 1/sqrt(hs).
// Threading: OpenMP over (batch, head) pairs; each pair runs single-threaded BLAS calls on
// strided views of qkv (no transposing copies). Throws std::invalid_argument if H does not
// divide C. Nothing allocates.
#pragma once

namespace rm::cpu {

// att[B,H,T,T] receives the softmax probabilities for the backward. Only the causal part is
// defined: entries with column > row are unspecified (some are zeroed, most are left as they
// were), so readers must look at j <= i only. out must not alias qkv.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H);

// dqkv[B,T,3C] OVERWRITTEN with the gradient w.r.t. qkv, given dout[B,T,C] and the qkv and att
// of the forward. datt_scratch must hold B*H*T*T floats (the size of att); only a small prefix
// (threads x min(T,64) x T floats) is actually used, so it stays in cache. dqkv must not alias
// any input.
void attention_backward(float* dqkv, float* datt_scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int H);

}  // namespace rm::cpu

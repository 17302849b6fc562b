// The MLP model's input layer: K consecutive token embeddings concatenated per position.
//
//   x[b,t, j*E:(j+1)*E] = emb[tokens[b, t-K+1+j], :]   (zeros where t-K+1+j < 0)
//
// x is [B*T, K*E], emb [V, E]; tokens must lie in [0, V) (the data loader checks them).
// T = float or bf16 (copied, no arithmetic). The backward ACCUMULATES into the float demb
// serially in row order: tokens repeat, and this is B*T*K*E adds, small next to the GEMMs.
#pragma once

namespace rm::cpu {

template <typename T>
void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K, int E);

template <typename T>
void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                int E);

}  // namespace rm::cpu

// Token + position embedding (GPT-2 input layer).
//
// Tokens must lie in [0, V) of the wte table the caller passes; they are not range-checked here
// (V is not known to the kernel), the data loader validates them. Threading: OpenMP inside.
#pragma once

namespace rm::cpu {

// out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]. tokens[B,T], wte[V,C], wpe[T_max >= T, C] or
// null (no position embedding), out[B,T,C].
void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C);

// dwte[tokens[b,t], :] += dout[b,t,:] and dwpe[t, :] += sum_b dout[b,t,:], both ACCUMULATED.
// dwpe may be null. Race-free and deterministic for any thread count: threads split the channel
// dimension, and each one walks all tokens in order, so repeated tokens never collide.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C);

}  // namespace rm::cpu

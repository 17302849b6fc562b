#include "kernels/cpu/context_embedding.h"

#include <cstring>

#include "kernels/bf16.h"
#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {

using detail::row_offset;

template <typename T>
void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K,
                               int E) {
  const int rows = B * Tn, KE = K * E;
  const bool parallel = static_cast<size_t>(rows) * KE >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; ++r) {
    const int b = r / Tn, t = r % Tn;
    T* out = x + row_offset(r, KE);
    for (int j = 0; j < K; ++j) {
      const int src = t - K + 1 + j;
      if (src < 0) {
        std::memset(static_cast<void*>(out + j * E), 0, E * sizeof(T));
      } else {
        std::memcpy(out + j * E, emb + row_offset(tokens[b * Tn + src], E), E * sizeof(T));
      }
    }
  }
}

template <typename T>
void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                int E) {
  const int rows = B * Tn, KE = K * E;
  for (int r = 0; r < rows; ++r) {
    const int b = r / Tn, t = r % Tn;
    const T* d = dx + row_offset(r, KE);
    for (int j = 0; j < K; ++j) {
      const int src = t - K + 1 + j;
      if (src < 0) continue;
      float* row = demb + row_offset(tokens[b * Tn + src], E);
      for (int e = 0; e < E; ++e) row[e] += load(d[j * E + e]);
    }
  }
}

template void context_embedding_forward<float>(float*, const int*, const float*, int, int, int,
                                               int);
template void context_embedding_forward<bf16>(bf16*, const int*, const bf16*, int, int, int, int);
template void context_embedding_backward<float>(float*, const float*, const int*, int, int, int,
                                                int);
template void context_embedding_backward<bf16>(float*, const bf16*, const int*, int, int, int,
                                               int);

}  // namespace rm::cpu

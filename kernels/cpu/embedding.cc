#include "kernels/cpu/embedding.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/parallel_util.h"

namespace rm::cpu {

using detail::row_offset;

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C) {
  const int N = B * T;
  const bool parallel = static_cast<size_t>(N) * C >= detail::kMinParallelElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int n = 0; n < N; ++n) {
    float* __restrict o = out + row_offset(n, C);
    const float* __restrict e = wte + row_offset(tokens[n], C);
    if (wpe != nullptr) {
      const float* __restrict p = wpe + row_offset(n % T, C);
#pragma omp simd
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    } else {
#pragma omp simd
      for (int c = 0; c < C; ++c) o[c] = e[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C) {
  const int N = B * T;
  if (N <= 0 || C <= 0) return;
  const bool parallel = static_cast<size_t>(N) * C >= detail::kMinParallelElems;
#pragma omp parallel if (parallel)
  {
    // One contiguous channel slice per thread (multiple of 16 floats, so slices never share a
    // cache line): each thread streams its slice of every dout row once.
    const int nt = omp_get_num_threads();
    const int per = ((C + nt - 1) / nt + 15) / 16 * 16;
    const int c0 = std::min(C, omp_get_thread_num() * per);
    const int c1 = std::min(C, c0 + per);
    for (int n = 0; n < N && c0 < c1; ++n) {
      float* __restrict g = dwte + row_offset(tokens[n], C);
      const float* __restrict d = dout + row_offset(n, C);
#pragma omp simd
      for (int c = c0; c < c1; ++c) g[c] += d[c];
    }
    if (dwpe != nullptr) {
      // Positions are distinct rows of dwpe: split over t, sum over b in order.
#pragma omp for schedule(static)
      for (int t = 0; t < T; ++t) {
        float* __restrict g = dwpe + row_offset(t, C);
        for (int b = 0; b < B; ++b) {
          const float* __restrict d = dout + row_offset(b * T + t, C);
#pragma omp simd
          for (int c = 0; c < C; ++c) g[c] += d[c];
        }
      }
    }
  }
}

}  // namespace rm::cpu

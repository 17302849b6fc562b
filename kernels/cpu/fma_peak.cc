#include "kernels/cpu/fma_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace rm::cpu {
namespace {

using Clock = std::chrono::steady_clock;

// 12 independent accumulators: FMA latency 4 cycles x 2 ports = 8 in flight at least; 12 also
// covers 5-cycle parts and leaves registers spare. `iters` rounds of 12 FMAs; the lanes' sum is
// returned so that the loop is not removed. A macro, not a template: each copy must be compiled
// with its own target attribute for the intrinsics to inline.
#define RM_FMA_CHAINS(V, SET1, FMA, STORE, LANES)                  \
  V a = SET1(0.999999f), b = SET1(1e-7f);                          \
  V c[12];                                                         \
  for (int i = 0; i < 12; ++i) c[i] = a;                           \
  for (long n = 0; n < iters; ++n) {                               \
    for (int i = 0; i < 12; ++i) c[i] = FMA(c[i], a, b);           \
  }                                                                \
  for (int i = 1; i < 12; ++i) c[0] = FMA(c[0], a, c[i]);          \
  alignas(64) float x[LANES];                                      \
  STORE(x, c[0]);                                                  \
  float s = 0;                                                     \
  for (float e : x) s += e;                                        \
  return s;

__attribute__((target("avx512f"))) float run512(long iters) {
  RM_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_store_ps, 16)
}

__attribute__((target("avx2,fma"))) float run256(long iters) {
  RM_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_store_ps, 8)
}

// Without FMA: a multiply and an add per lane-op, counted as the 2 flops they are.
inline __m128 muladd128(__m128 c, __m128 a, __m128 b) { return _mm_add_ps(_mm_mul_ps(c, a), b); }
float run128(long iters) { RM_FMA_CHAINS(__m128, _mm_set1_ps, muladd128, _mm_store_ps, 4) }

#undef RM_FMA_CHAINS

}  // namespace

FmaPeak measure_fma_peak(const CpuFeatures& cpu, int threads, double seconds) {
  FmaPeak p;
  p.threads = std::max(1, threads);
  const SimdLevel level = cpu.level();
  float (*run)(long) = run128;
  p.lanes = 4;
  if (level >= SimdLevel::kAvx512) {
    run = run512;
    p.lanes = 16;
  } else if (level >= SimdLevel::kAvx2) {
    run = run256;
    p.lanes = 8;
  }
  constexpr long kIters = 200000;  // 2.4M vector FMAs: ~0.5-1 ms a window
  const double flops_per_window = 2.0 * 12 * kIters * p.lanes;
  const double budget = std::max(0.01, seconds);
  const auto n = static_cast<size_t>(p.threads);
  std::vector<double> best(n, 0.0), busy(n, 0.0);
  std::vector<long> windows(n, 0);
  std::vector<float> sums(n, 0.0f);
#pragma omp parallel num_threads(p.threads)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
#pragma omp barrier
    const auto start = Clock::now();  // the same moment, give or take a wake-up, on every thread
    float acc = 0;
    double b = 0;
    long w = 0;
    double elapsed = 0;
    while (elapsed < budget) {
      const auto t0 = Clock::now();
      acc += run(kIters);
      const auto t1 = Clock::now();
      const double s = std::chrono::duration<double>(t1 - t0).count();
      if (s > 0) b = std::max(b, flops_per_window / s);
      ++w;
      elapsed = std::chrono::duration<double>(t1 - start).count();
    }
    best[t] = b;
    windows[t] = w;
    busy[t] = elapsed;
    sums[t] = acc;  // kept, so that the loops are not optimised away
  }
  asm volatile("" : : "r"(sums.data()) : "memory");
  std::vector<double> sorted = best;
  std::sort(sorted.begin(), sorted.end());
  p.flops_per_s_per_thread = sorted[sorted.size() / 2];
  // All threads together: every window any thread finished over the span they ran in together.
  // Not the sum of each thread's best window: threads that share a core each find a window in
  // which they ran alone, and their sum claimed a concurrency that never happened (1000 threads
  // on 2 cores "reached" 230 TFLOP/s).
  double total_windows = 0;
  for (long w : windows) total_windows += static_cast<double>(w);
  const double span = *std::max_element(busy.begin(), busy.end());
  p.flops_per_s = total_windows * flops_per_window / span;
  return p;
}

}  // namespace rm::cpu

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
  std::vector<double> best(static_cast<size_t>(p.threads), 0.0);
  std::vector<float> sums(static_cast<size_t>(p.threads), 0.0f);
#pragma omp parallel num_threads(p.threads)
  {
    const int t = omp_get_thread_num();
    const auto start = Clock::now();
    float acc = 0;
    double b = 0;
    while (std::chrono::duration<double>(Clock::now() - start).count() < budget) {
      const auto t0 = Clock::now();
      acc += run(kIters);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (s > 0) b = std::max(b, flops_per_window / s);
    }
    best[static_cast<size_t>(t)] = b;
    sums[static_cast<size_t>(t)] = acc;  // kept, so that the loops are not optimised away
  }
  asm volatile("" : : "r"(sums.data()) : "memory");
  std::vector<double> sorted = best;
  std::sort(sorted.begin(), sorted.end());
  p.flops_per_s_per_thread = sorted[sorted.size() / 2];
  for (double b : best) p.flops_per_s += b;
  return p;
}

}  // namespace rm::cpu

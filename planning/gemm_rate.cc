#include "planning/gemm_rate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "base/small_stats.h"
#include "kernels/cpu/kernels.h"

namespace rm {

double time_gemm(const GemmShape& g, int reps) {
  const size_t a_size = static_cast<size_t>(g.m) * g.k, b_size = static_cast<size_t>(g.k) * g.n,
               c_size = static_cast<size_t>(g.m) * g.n;
  const int copies = g.per_head ? std::max(1, omp_get_max_threads()) : 1;
  std::vector<float> A(a_size * copies, 0.01f), B(b_size * copies, 0.02f), C(c_size * copies);
  const int lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  auto run_once = [&] {
    if (g.per_head) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < g.count; ++i) {
        const int c = omp_get_thread_num() % copies;
        cpu::sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, A.data() + c * a_size, lda,
                   B.data() + c * b_size, ldb, 0.0f, C.data() + c * c_size, g.n);
      }
    } else {
      for (int64_t i = 0; i < g.count; ++i) {
        cpu::sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, A.data(), lda, B.data(), ldb, 0.0f,
                   C.data(), g.n);
      }
    }
  };
  run_once();  // warm: first touch, BLAS thread start
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    t.push_back(seconds_between(t0, std::chrono::steady_clock::now()));
  }
  return median(t);
}

double time_device_gemm(Compute& compute, const GemmShape& g, Precision precision, int reps) {
  const size_t elem = precision == Precision::kBf16 ? sizeof(bf16) : sizeof(float);
  const size_t a = static_cast<size_t>(g.m) * g.k, w = static_cast<size_t>(g.n) * g.k,
               c = static_cast<size_t>(g.m) * g.n;
  void* A = compute.allocate(a * elem);
  void* W = compute.allocate(w * elem);
  void* C = compute.allocate(c * elem);
  auto run_once = [&] {
    for (int64_t i = 0; i < g.count; ++i) {
      if (precision == Precision::kBf16) {
        compute.layers<bf16>().linear_forward(static_cast<bf16*>(C), static_cast<const bf16*>(A),
                                              static_cast<const bf16*>(W), nullptr, g.m, g.k,
                                              g.n);
      } else {
        compute.sgemm(false, true, g.m, g.n, g.k, 1.0f, static_cast<const float*>(A), g.k,
                      static_cast<const float*>(W), g.k, 0.0f, static_cast<float*>(C), g.n);
      }
    }
    compute.synchronize();
  };
  run_once();  // warm: cuBLAS's heuristics and workspace
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    t.push_back(seconds_between(t0, std::chrono::steady_clock::now()));
  }
  compute.release(C);
  compute.release(W);
  compute.release(A);
  return median(t);
}

double sgemm_rate(const std::vector<GemmShape>& gemms, int reps) {
  double flops = 0, secs = 0;
  for (const GemmShape& g : gemms) {
    flops += g.flops();
    secs += time_gemm(g, reps);
  }
  return secs > 0 ? flops / secs : 0;
}

}  // namespace rm

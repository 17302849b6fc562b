#include "planning/gemm_rate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "base/small_stats.h"
#include "kernels/cpu/kernels.h"

namespace rm {

// The operands of `count` issues of one shape in a step are count different tensors (a layer's
// own weights and activations), so a baseline that reused one set would run from cache where the
// step cannot. Each issue takes the next of up to `count` copies, as many as fit in this much
// memory: past a last-level cache (tens of MB) on the shapes where it matters.
constexpr size_t kBaselineBytes = size_t{128} << 20;

double time_gemm(const GemmShape& g, int reps) {
  const size_t a_size = static_cast<size_t>(g.m) * g.k, b_size = static_cast<size_t>(g.k) * g.n,
               c_size = static_cast<size_t>(g.m) * g.n;
  const size_t copy_bytes = (a_size + b_size + c_size) * sizeof(float);
  // Per-head issues run on every thread at once: each thread cycles through copies of its own,
  // so that no two threads ever write one C.
  const int64_t threads = g.per_head ? std::max(1, omp_get_max_threads()) : 1;
  const int64_t per_thread = std::max<int64_t>(
      1, std::min<int64_t>(g.count / threads,
                           static_cast<int64_t>(kBaselineBytes / threads / copy_bytes)));
  const int64_t copies = threads * per_thread;
  std::vector<float> A(a_size * copies, 0.01f), B(b_size * copies, 0.02f), C(c_size * copies);
  const int lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  auto issue = [&](int64_t copy) {
    cpu::sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, A.data() + copy * a_size, lda,
               B.data() + copy * b_size, ldb, 0.0f, C.data() + copy * c_size, g.n);
  };
  auto run_once = [&] {
    if (g.per_head) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < g.count; ++i) {
        issue((omp_get_thread_num() % threads) * per_thread + i % per_thread);
      }
    } else {
      for (int64_t i = 0; i < g.count; ++i) issue(i % copies);
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

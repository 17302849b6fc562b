// `ringmaster bench cpu`: what this CPU can do beside what the BLAS makes of it, in one process.
//
// Prints the CPU (CPUID), the BLAS kernels in use and why (kernels/cpu/blas_kernels.h), what
// this binary's own code was compiled for (RM_CPU_ARCH, kernels/cpu/isa_guard.h), the
// measured FMA peak (kernels/cpu/fma_peak.h), and a 1024^3 sgemm on one thread and on all,
// each as GFLOP/s and as a share of the peak of the threads it ran on. A generic kernel set
// shows as an sgemm far below the peak (Prescott reaches about a fifth of an AVX-512 core).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/elapsed.h"
#include "base/error_report.h"
#include "base/exit_codes.h"
#include "base/small_stats.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fma_peak.h"
#include "kernels/cpu/isa_guard.h"
#include "kernels/cpu/threads.h"
#include "launcher/commands.h"

namespace rm {
namespace {

// GFLOP/s of C = A B at n x n x n on `threads` threads: the median of `reps` timed calls.
double sgemm_gflops(int n, int threads, int reps) {
  cpu::set_num_threads(threads);
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                n, 0.0f, c.data(), n);
  };
  call();  // warm-up: first touch of c, the library's buffers
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    s.push_back(seconds_since(t0));
  }
  return 2.0 * n * n * n / median(s) / 1e9;
}

}  // namespace

int cmd_bench_cpu(const BenchCpuArgs& args) {
  return report_errors([&] {
    const cpu::CpuFeatures& f = cpu::host_cpu_features();
    const int all = args.threads > 0 ? args.threads : cpu::num_threads();
    std::printf("# bench cpu: %s\n", f.summary().c_str());
    std::printf("blas: %s\n", cpu::blas_description().c_str());
    // A build below this CPU (portable, or made for older nodes) leaves the element-wise
    // kernels' wider vectors unused: said, since it is a rebuild away.
    const std::string below = std::strcmp(cpu::best_isa_level(cpu::kBuiltIsaFeatures),
                                          cpu::best_isa_level(cpu::cpu_isa_features())) != 0
                                  ? std::string(" (this CPU is ") +
                                        cpu::best_isa_level(cpu::cpu_isa_features()) +
                                        ": cmake -DRM_CPU_ARCH=native would use it)"
                                  : "";
    std::printf("code: built for %s%s\n", cpu::build_isa_summary().c_str(), below.c_str());
    const cpu::FmaPeak one = cpu::measure_fma_peak(f, 1, 0.1);
    const cpu::FmaPeak many = cpu::measure_fma_peak(f, all, 0.1);
    const char* plural = all == 1 ? "" : "s";
    std::printf("peak (FMA loop, %d fp32 lanes): 1 thread %.1f GFLOP/s | %d thread%s %.1f GFLOP/s\n",
                one.lanes, one.flops_per_s / 1e9, all, plural, many.flops_per_s / 1e9);
    const double s1 = sgemm_gflops(args.n, 1, args.reps);
    const double sn = sgemm_gflops(args.n, all, args.reps);
    std::printf("sgemm %dx%dx%d: 1 thread %.1f GFLOP/s = %.0f%% of peak | %d thread%s %.1f "
                "GFLOP/s = %.0f%% of peak\n",
                args.n, args.n, args.n, s1, 100 * s1 * 1e9 / one.flops_per_s, all, plural, sn,
                100 * sn * 1e9 / many.flops_per_s);
    return kExitOk;
  });
}

}  // namespace rm

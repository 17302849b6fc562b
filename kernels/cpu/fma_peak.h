// The machine's peak fp32 FLOP/s, measured: the denominator of "MFU vs peak".
//
// MFU against the BLAS's own sgemm rate says how close a step comes to the GEMMs' speed; it
// cannot see a slow BLAS (generic kernels make both slow, and the ratio looks fine). The peak is
// what the cores can do: FMA units x vector width x clock. The clock under load (turbo, AVX-512
// licence, a hypervisor) is not in CPUID, so it is measured: each thread runs chains of
// independent vector FMAs of the widest width the CPU has (enough chains to cover the FMA
// latency on two ports) for a short time. Per thread the best of its windows counts; for all
// threads together, what they did in the span they ran at once (a core shared by two threads
// counts once).
#pragma once

#include "kernels/cpu/cpu_features.h"

namespace rm::cpu {

struct FmaPeak {
  double flops_per_s_per_thread = 0;  // median of the threads' best windows
  double flops_per_s = 0;             // all threads together, sustained over the run
  int threads = 0;
  int lanes = 0;                      // fp32 lanes of the vector used (16, 8 or 4)
};

// Runs the FMA loop on `threads` OpenMP threads at once for about `seconds` (>= 0.01), with the
// widest vectors `cpu` allows. threads < 1 means 1.
FmaPeak measure_fma_peak(const CpuFeatures& cpu, int threads, double seconds = 0.05);

}  // namespace rm::cpu

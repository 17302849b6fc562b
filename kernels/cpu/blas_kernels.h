// Which OpenBLAS kernel set this process runs, and making it the right one for the CPU.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: when the library loads, it picks a kernel set
// ("core") from the CPU's family and model. A CPU newer than the library is not in its tables and
// gets the generic Prescott (SSE3) kernels -- on a 2024 Xeon (family 6 model 207) 5x slower than
// its AVX-512 ones -- and nothing says so. The only way to choose another set is the variable
// OPENBLAS_CORETYPE, which the library reads once, when it loads: before main(). So
// select_blas_kernels() decides from CPUID (cpu_features.h) and, when the library's choice is
// below what the CPU can do, re-executes the process with the variable set. Every process that
// trains is a `ringmaster` process (run's supervised child, each rank under mpirun or srun,
// `worker`), and main() calls it first, so each decides for the CPU it runs on: a host of
// another kind in a multi-host job decides for itself, since the re-executed process removes
// the variable again before it starts anything.
//
// The rules (choose_blas_core, unit-tested over CPUID cases):
//  - OPENBLAS_CORETYPE set by the user always wins, and the banner says so.
//  - A library choice at or above the CPU's SIMD level is kept (the library knows the CPU).
//  - A lower one is replaced by the best set for the CPU's features: Cooperlake for AVX-512 with
//    BF16, SkylakeX for AVX-512, Haswell for AVX2+FMA (Zen on AMD), Sandybridge for AVX. The
//    library itself falls back further if a set is not supported (it checks the CPU too).
//  - A core name the table does not know is kept (a newer library knows better than we do).
#pragma once

#include <optional>
#include <string>

#include "kernels/cpu/cpu_features.h"

namespace rm::cpu {

// Set in the re-executed process's environment: the core the library had picked.
inline constexpr const char* kBlasReexecEnv = "RM_BLAS_REEXEC";
// For tests only: decide as if the library had picked this core (exercises the re-execution on
// a machine whose library knows its CPU). Ignored in the re-executed process.
inline constexpr const char* kBlasAssumeCoreEnv = "RM_BLAS_ASSUME_CORE";

// The SIMD level an OpenBLAS core name's kernels use (case-insensitive); nullopt if unknown.
std::optional<SimdLevel> blas_core_level(const std::string& core);

// The OpenBLAS (0.3.21) core name for a CPU: the best set its features allow, or "" (SSE only:
// the library's generic choice is as good as any).
std::string best_blas_core(const CpuFeatures& cpu);

struct BlasCoreChoice {
  std::string core;     // the core to run: the library's, the user's or ours
  bool replace = false;  // true: re-execute with OPENBLAS_CORETYPE=core
  std::string why;      // one clause for the banner
};

// library_core: what the library picked; user_coretype: OPENBLAS_CORETYPE or null.
BlasCoreChoice choose_blas_core(const CpuFeatures& cpu, const std::string& library_core,
                                const char* user_coretype);

// Called first in main(): decides, and re-executes /proc/self/exe with the same argv when the
// kernels must change (returns only when they need not, or when exec failed: then it warns on
// stderr and goes on with the library's choice).
void select_blas_kernels(char** argv);

// What runs and why, for banners: "OpenBLAS 0.3.21, SkylakeX kernels (the library's own choice,
// right for this CPU's AVX-512)". Valid after select_blas_kernels (before it: the library's
// choice, "why" unknown).
std::string blas_description();
std::string blas_core_name();  // the core the library runs now: "SkylakeX"
std::string blas_library();    // "OpenBLAS 0.3.21"

}  // namespace rm::cpu

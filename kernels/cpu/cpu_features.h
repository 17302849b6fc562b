// What this x86 CPU can do, read from CPUID (and XGETBV, for what the OS saves): the facts the
// BLAS kernel choice (blas_kernels.h) and the FMA peak (fma_peak.h) are made from.
//
// decode_cpuid() is a pure function of the raw registers, so every CPU we care about -- including
// models newer than the BLAS -- is a unit test case (cpu_features_test.cc). read_cpuid() is the
// only part that executes the instructions; on a non-x86 build it returns zeros (no features).
#pragma once

#include <cstdint>
#include <string>

namespace rm::cpu {

// The raw registers decode_cpuid reads.
struct CpuidRegisters {
  std::string vendor;              // leaf 0: "GenuineIntel", "AuthenticAMD"
  uint32_t max_leaf = 0;           // leaf 0 EAX
  uint32_t leaf1_eax = 0;          // family / model / stepping
  uint32_t leaf1_ecx = 0;          // FMA (12), OSXSAVE (27), AVX (28)
  uint32_t leaf7_ebx = 0;          // AVX2 (5), AVX512F (16), DQ (17), CD (28), BW (30), VL (31)
  uint32_t leaf7_edx = 0;          // AVX512_FP16 (23), AMX-TILE (24)
  uint32_t leaf7_1_eax = 0;        // AVX512_BF16 (5)
  uint64_t xcr0 = 0;               // XGETBV(0): the register state the OS saves
  std::string brand;               // leaves 0x80000002..4, spaces trimmed
};

// The widest vector instruction set usable here, in the order the BLAS kernel sets need it.
enum class SimdLevel { kSse, kAvx, kAvx2, kAvx512, kAvx512Bf16 };
const char* simd_level_name(SimdLevel level);  // "SSE", "AVX", "AVX2+FMA", "AVX-512", ...

struct CpuFeatures {
  std::string vendor, brand;
  int family = 0, model = 0;  // display family / model (extended fields folded in)
  bool avx = false, fma = false, avx2 = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false, avx512_fp16 = false, amx_tile = false;
  // The OS saves the YMM (AVX) / opmask+ZMM (AVX-512) state: without it the instructions fault.
  bool os_avx = false, os_avx512 = false;

  // AVX-512 here means the Skylake-X set (F, CD, BW, DQ, VL) that OpenBLAS's kernels use.
  SimdLevel level() const;
  // "Intel(R) Xeon(R) ... (family 6 model 207, AVX-512 with BF16 and FP16)".
  std::string summary() const;
};

CpuFeatures decode_cpuid(const CpuidRegisters& r);

// This CPU's registers (executes CPUID / XGETBV).
CpuidRegisters read_cpuid();

// decode_cpuid(read_cpuid()), computed once.
const CpuFeatures& host_cpu_features();

// What this binary's own code was compiled for (RM_CPU_ARCH, kernels/cpu/isa_guard.h), for
// banners and the run's events: "native (AMD EPYC 9654): x86-64-v4 + avx512bf16, ...",
// "x86-64-v3", "portable".
std::string build_isa_summary();

}  // namespace rm::cpu

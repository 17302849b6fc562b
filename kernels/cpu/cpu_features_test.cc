// CPUID decoding and the BLAS kernel choice over real CPUs' registers (values as CPUID reports
// them on each part; leaf 1 EAX carries family/model/stepping).
#include <gtest/gtest.h>

#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fma_peak.h"
#include "kernels/cpu/threads.h"

namespace rm::cpu {
namespace {

constexpr uint32_t kFma = 1u << 12, kOsxsave = 1u << 27, kAvx = 1u << 28;
constexpr uint32_t kAvx2 = 1u << 5;
constexpr uint32_t kSkx = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);
constexpr uint64_t kXcrAvx = 0x7, kXcrAvx512 = 0xe7;

CpuidRegisters intel(uint32_t leaf1_eax) {
  CpuidRegisters r;
  r.vendor = "GenuineIntel";
  r.max_leaf = 0x20;
  r.leaf1_eax = leaf1_eax;
  r.leaf1_ecx = kFma | kOsxsave | kAvx;
  r.leaf7_ebx = kAvx2;
  r.xcr0 = kXcrAvx;
  return r;
}

// Xeon 5th gen (Emerald Rapids), family 6 model 207 = 0xCF: newer than Debian 12's OpenBLAS.
CpuidRegisters emerald_rapids() {
  CpuidRegisters r = intel(0x000C06F2);
  r.leaf7_ebx |= kSkx;
  r.leaf7_edx = (1u << 23) | (1u << 24);  // AVX512_FP16, AMX-TILE
  r.leaf7_1_eax = 1u << 5;                 // AVX512_BF16
  r.xcr0 = kXcrAvx512 | 0x60000;           // + AMX tile state
  r.brand = "  INTEL(R) XEON(R) PLATINUM 8581C CPU @ 2.10GHz ";
  return r;
}

TEST(CpuFeatures, DecodesFamilyModelAndAvx512WithBf16) {
  const CpuFeatures f = decode_cpuid(emerald_rapids());
  EXPECT_EQ(f.family, 6);
  EXPECT_EQ(f.model, 207);
  EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16 && f.avx512_fp16);
  EXPECT_TRUE(f.amx_tile);
  EXPECT_EQ(f.level(), SimdLevel::kAvx512Bf16);
  EXPECT_EQ(f.brand, "INTEL(R) XEON(R) PLATINUM 8581C CPU @ 2.10GHz");
  EXPECT_NE(f.summary().find("family 6 model 207, AVX-512 with BF16 and FP16, AMX"),
            std::string::npos)
      << f.summary();
}

TEST(CpuFeatures, AmdFamilyAddsTheExtendedFamily) {
  CpuidRegisters r = intel(0x00A10F11);  // Zen 4 (Genoa): family 0xF + 0xA = 25, model 0x11
  r.vendor = "AuthenticAMD";
  const CpuFeatures f = decode_cpuid(r);
  EXPECT_EQ(f.family, 25);
  EXPECT_EQ(f.model, 17);
}

TEST(CpuFeatures, Avx512TheOsDoesNotSaveIsNotUsable) {
  CpuidRegisters r = emerald_rapids();
  r.xcr0 = kXcrAvx;  // the kernel left the ZMM state out of XSAVE
  EXPECT_EQ(decode_cpuid(r).level(), SimdLevel::kAvx2);
  r.leaf1_ecx &= ~kOsxsave;  // no XSAVE at all: not even AVX
  EXPECT_EQ(decode_cpuid(r).level(), SimdLevel::kSse);
}

TEST(BlasKernels, ANewerCpuThanTheLibraryGetsItsAvx512Kernels) {
  // What Debian 12's OpenBLAS 0.3.21 does on model 207: the generic Prescott kernels.
  const BlasCoreChoice c = choose_blas_core(decode_cpuid(emerald_rapids()), "Prescott", nullptr);
  EXPECT_TRUE(c.replace);
  EXPECT_EQ(c.core, "Cooperlake");
  EXPECT_NE(c.why.find("picked Prescott"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("model 207"), std::string::npos) << c.why;
}

TEST(BlasKernels, EachSimdLevelGetsItsKernelSet) {
  CpuidRegisters skx = intel(0x00050657);  // Cascade Lake, model 85
  skx.leaf7_ebx |= kSkx;
  skx.xcr0 = kXcrAvx512;
  EXPECT_EQ(choose_blas_core(decode_cpuid(skx), "Prescott", nullptr).core, "SkylakeX");
  EXPECT_EQ(choose_blas_core(decode_cpuid(intel(0x000306C3)), "Nehalem", nullptr).core,
            "Haswell");
  CpuidRegisters zen = intel(0x00A10F11);
  zen.vendor = "AuthenticAMD";
  EXPECT_EQ(choose_blas_core(decode_cpuid(zen), "Barcelona", nullptr).core, "Zen");
  CpuidRegisters snb = intel(0x000206A7);  // Sandy Bridge: AVX, no AVX2 or FMA
  snb.leaf1_ecx &= ~kFma;
  snb.leaf7_ebx = 0;
  EXPECT_EQ(choose_blas_core(decode_cpuid(snb), "Core2", nullptr).core, "Sandybridge");
}

TEST(BlasKernels, TheLibrarysChoiceStaysWhenItKnowsTheCpu) {
  CpuidRegisters skx = intel(0x00050657);
  skx.leaf7_ebx |= kSkx;
  skx.xcr0 = kXcrAvx512;
  const BlasCoreChoice c = choose_blas_core(decode_cpuid(skx), "SkylakeX", nullptr);
  EXPECT_FALSE(c.replace);
  EXPECT_EQ(c.core, "SkylakeX");
  EXPECT_NE(c.why.find("own choice"), std::string::npos);
  // BF16 does not change sgemm: SkylakeX on a BF16 part is not generic.
  EXPECT_FALSE(choose_blas_core(decode_cpuid(emerald_rapids()), "skylakex", nullptr).replace);
  // An SSE-only CPU: nothing better to pick.
  CpuidRegisters old = intel(0x000006F6);
  old.leaf1_ecx = 0;
  old.leaf7_ebx = 0;
  EXPECT_FALSE(choose_blas_core(decode_cpuid(old), "Core2", nullptr).replace);
}

TEST(BlasKernels, TheUsersCoretypeAlwaysWins) {
  const BlasCoreChoice c = choose_blas_core(decode_cpuid(emerald_rapids()), "Prescott", "Haswell");
  EXPECT_FALSE(c.replace);
  EXPECT_EQ(c.core, "Prescott");  // what the library runs: it read the user's variable itself
  // Kept, and said to be below the CPU: AVX2 kernels on AVX-512.
  EXPECT_EQ(c.why,
            "OPENBLAS_CORETYPE=Haswell set by the user; slower than this CPU allows: it has "
            "AVX-512 with BF16, for which ringmaster would choose Cooperlake (unset the variable "
            "to let it)");
  // At the CPU's level, or a name the table does not know: no remark.
  EXPECT_EQ(choose_blas_core(decode_cpuid(emerald_rapids()), "Prescott", "SkylakeX").why,
            "OPENBLAS_CORETYPE=SkylakeX set by the user");
  EXPECT_EQ(choose_blas_core(decode_cpuid(emerald_rapids()), "Prescott", "Future9").why,
            "OPENBLAS_CORETYPE=Future9 set by the user");
}

TEST(BlasKernels, ACoreNameWeDoNotKnowIsKept) {
  const BlasCoreChoice c = choose_blas_core(decode_cpuid(emerald_rapids()), "GraniteRapids", nullptr);
  EXPECT_FALSE(c.replace);
  EXPECT_EQ(c.core, "GraniteRapids");
  EXPECT_FALSE(blas_core_level("GraniteRapids").has_value());
  EXPECT_EQ(blas_core_level("haswell"), SimdLevel::kAvx2);
}

TEST(FmaPeak, ThisCpuMeasuresAPlausiblePeak) {
  const CpuFeatures& cpu = host_cpu_features();
  const FmaPeak p = measure_fma_peak(cpu, 1, 0.02);
  // At least 1 GFLOP/s (any x86 since 2000), at most 32 flops/cycle/lane-op at 6 GHz.
  EXPECT_GT(p.flops_per_s_per_thread, 1e9);
  EXPECT_LT(p.flops_per_s_per_thread, 2.0 * 2 * p.lanes * 6e9);
}

// Four threads per CPU share the cores: together they reach at most what the CPUs do (each
// thread's best window alone, summed, claimed four times that).
TEST(FmaPeak, ThreadsSharingCoresAddUpToTheCoresOnly) {
  const CpuFeatures& cpu = host_cpu_features();
  const int cpus = available_cpus();
  const FmaPeak one = measure_fma_peak(cpu, 1, 0.05);
  const FmaPeak many = measure_fma_peak(cpu, 4 * cpus, 0.05);
  EXPECT_EQ(many.threads, 4 * cpus);
  EXPECT_LT(many.flops_per_s, 1.5 * cpus * one.flops_per_s_per_thread)
      << cpus << " CPUs, one thread's best " << one.flops_per_s_per_thread;
  EXPECT_GT(many.flops_per_s, 0.1 * one.flops_per_s_per_thread);
}

}  // namespace
}  // namespace rm::cpu

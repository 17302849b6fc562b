// The instruction set guard's parts (isa_guard.h): what the build records against the compiler's
// own macros, the names, the levels and the refusal. What a real process does on a CPU without
// the build's extensions -- refuses before main instead of SIGILL -- is run under an emulated
// older CPU in tests/cpu_kernels_cli_test.cc.
#include "kernels/cpu/isa_guard.h"

#include <gtest/gtest.h>

#include <string>

namespace rm::cpu {
namespace {

std::string names(uint64_t bits) {
  char buf[512];
  isa_feature_names(bits, buf, sizeof buf);
  return buf;
}

TEST(IsaGuard, TheBuildRecordsWhatItsCompilerFlagsEnable) {
  // This test is compiled with the flags of built_isa.cc (RM_CPU_ARCH): the same macros.
#ifdef __AVX2__
  EXPECT_TRUE(kBuiltIsaFeatures & kIsaAvx2);
#else
  EXPECT_FALSE(kBuiltIsaFeatures & kIsaAvx2);
#endif
#ifdef __FMA__
  EXPECT_TRUE(kBuiltIsaFeatures & kIsaFma);
#else
  EXPECT_FALSE(kBuiltIsaFeatures & kIsaFma);
#endif
#ifdef __AVX512F__
  EXPECT_TRUE(kBuiltIsaFeatures & kIsaAvx512f);
#else
  EXPECT_FALSE(kBuiltIsaFeatures & kIsaAvx512f);
#endif
#ifdef __SSE4_2__
  EXPECT_TRUE(kBuiltIsaFeatures & kIsaSse42);
#else
  EXPECT_FALSE(kBuiltIsaFeatures & kIsaSse42);
#endif
  // The guard let this process start: everything recorded is here.
  EXPECT_EQ(kBuiltIsaFeatures & ~cpu_isa_features(), 0u) << names(kBuiltIsaFeatures);
  if (std::string(kBuiltIsaArch) == "native") {
    EXPECT_STRNE(kBuiltIsaHostCpu, "");  // the refusal names the machine it was built on
  }
}

TEST(IsaGuard, AvxAndAvx512CountOnlyWhereTheOsSavesTheirRegisters) {
  IsaRegisters r;
  r.max_leaf = 7;
  r.leaf1_ecx = (1u << 0) | (1u << 12) | (1u << 20) | (1u << 27) | (1u << 28);  // +OSXSAVE
  r.leaf7_ebx = (1u << 5) | (1u << 16) | (1u << 30) | (1u << 31);  // AVX2, AVX512F/BW/VL
  r.leaf7_1_eax = 1u << 5;                                         // AVX512BF16
  r.xcr0 = 0xe7;                                                   // SSE, YMM, opmask, ZMM
  const uint64_t all = kIsaSse3 | kIsaFma | kIsaSse42 | kIsaAvx | kIsaAvx2 | kIsaAvx512f |
                       kIsaAvx512bw | kIsaAvx512vl | kIsaAvx512bf16;
  EXPECT_EQ(names(decode_isa_features(r)), names(all));
  r.xcr0 = 0x7;  // an OS (or hypervisor) that does not save the ZMM state
  EXPECT_EQ(names(decode_isa_features(r)),
            names(kIsaSse3 | kIsaFma | kIsaSse42 | kIsaAvx | kIsaAvx2));
  r.leaf1_ecx &= ~(1u << 27);  // no XSAVE at all: XCR0 is not to be read
  EXPECT_EQ(names(decode_isa_features(r)), names(kIsaSse3 | kIsaSse42));
  r.max_leaf = 1;  // leaf 7 absent: its words mean nothing
  r.leaf1_ecx |= 1u << 27;
  r.xcr0 = 0xe7;
  EXPECT_EQ(names(decode_isa_features(r)), names(kIsaSse3 | kIsaFma | kIsaSse42 | kIsaAvx));
  EXPECT_EQ(decode_isa_features(IsaRegisters{}), 0u);
}

#if defined(__GNUC__) && !defined(__clang__)
// GCC's own probe (libgcc's, which also checks what the OS saves) agrees on this CPU.
TEST(IsaGuard, ThisCpuReadsAsGccsOwnProbeReadsIt) {
  const uint64_t have = cpu_isa_features();
#define RM_AGREE(bit, name) \
  EXPECT_EQ((have & (bit)) != 0, __builtin_cpu_supports(name) != 0) << name
  RM_AGREE(kIsaSse3, "sse3");
  RM_AGREE(kIsaSsse3, "ssse3");
  RM_AGREE(kIsaSse41, "sse4.1");
  RM_AGREE(kIsaSse42, "sse4.2");
  RM_AGREE(kIsaPopcnt, "popcnt");
  RM_AGREE(kIsaAvx, "avx");
  RM_AGREE(kIsaAvx2, "avx2");
  RM_AGREE(kIsaFma, "fma");
  RM_AGREE(kIsaF16c, "f16c");
  RM_AGREE(kIsaBmi, "bmi");
  RM_AGREE(kIsaBmi2, "bmi2");
  RM_AGREE(kIsaLzcnt, "lzcnt");
  RM_AGREE(kIsaMovbe, "movbe");
  RM_AGREE(kIsaAes, "aes");
  RM_AGREE(kIsaPclmul, "pclmul");
  RM_AGREE(kIsaAvx512f, "avx512f");
  RM_AGREE(kIsaAvx512cd, "avx512cd");
  RM_AGREE(kIsaAvx512bw, "avx512bw");
  RM_AGREE(kIsaAvx512dq, "avx512dq");
  RM_AGREE(kIsaAvx512vl, "avx512vl");
  RM_AGREE(kIsaAvx512ifma, "avx512ifma");
  RM_AGREE(kIsaAvx512vbmi, "avx512vbmi");
  RM_AGREE(kIsaAvx512vbmi2, "avx512vbmi2");
  RM_AGREE(kIsaAvx512vnni, "avx512vnni");
  RM_AGREE(kIsaAvx512bitalg, "avx512bitalg");
  RM_AGREE(kIsaAvx512vpopcntdq, "avx512vpopcntdq");
  RM_AGREE(kIsaAvx512bf16, "avx512bf16");
  RM_AGREE(kIsaAvx512fp16, "avx512fp16");
  RM_AGREE(kIsaAvxvnni, "avxvnni");
  RM_AGREE(kIsaGfni, "gfni");
  RM_AGREE(kIsaVaes, "vaes");
  RM_AGREE(kIsaVpclmulqdq, "vpclmulqdq");
  RM_AGREE(kIsaFma4, "fma4");
  RM_AGREE(kIsaXop, "xop");
#undef RM_AGREE
}
#endif

TEST(IsaGuard, NamesComeLowestFirstAndACutListStillSaysItsLength) {
  EXPECT_EQ(names(kIsaAvx512bw | kIsaAvx2 | kIsaSse41), "sse4.1, avx2, avx512bw");
  EXPECT_EQ(names(0), "");
  char small[8];
  const size_t need = isa_feature_names(kIsaAvx512vpopcntdq | kIsaAvx512bf16, small, sizeof small);
  EXPECT_EQ(need, std::string("avx512vpopcntdq, avx512bf16").size());
  EXPECT_EQ(std::string(small), "avx512v");  // cut short, NUL-terminated
}

TEST(IsaGuard, TheLevelIsTheHighestOneWhoseExtensionsAreAllThere) {
  const uint64_t v2 = kIsaSse3 | kIsaSsse3 | kIsaSse41 | kIsaSse42 | kIsaPopcnt;
  const uint64_t v3 =
      v2 | kIsaAvx | kIsaAvx2 | kIsaFma | kIsaF16c | kIsaBmi | kIsaBmi2 | kIsaLzcnt | kIsaMovbe;
  const uint64_t v4 = v3 | kIsaAvx512f | kIsaAvx512cd | kIsaAvx512bw | kIsaAvx512dq | kIsaAvx512vl;
  EXPECT_STREQ(best_isa_level(0), "portable");
  EXPECT_STREQ(best_isa_level(kIsaSse3), "portable");
  EXPECT_STREQ(best_isa_level(v2), "x86-64-v2");
  EXPECT_STREQ(best_isa_level(v3 & ~kIsaMovbe), "x86-64-v2");   // Haswell-class without one part
  EXPECT_STREQ(best_isa_level(v3 | kIsaAvx512f), "x86-64-v3");  // AVX-512F alone is not v4
  EXPECT_STREQ(best_isa_level(v4 | kIsaAvx512bf16), "x86-64-v4");
}

TEST(IsaGuard, TheRefusalNamesWhatIsMissingTheMachinesAndTheWayOut) {
  const uint64_t v3 = kIsaSse3 | kIsaSsse3 | kIsaSse41 | kIsaSse42 | kIsaPopcnt | kIsaAvx |
                      kIsaAvx2 | kIsaFma | kIsaF16c | kIsaBmi | kIsaBmi2 | kIsaLzcnt | kIsaMovbe;
  const uint64_t built = v3 | kIsaAvx512f | kIsaAvx512bw;
  char line[2048];
  const size_t len =
      format_isa_refusal(line, sizeof line, "ringmaster", built, v3 | kIsaAes,
                         "Intel(R) Xeon(R) CPU E5-2690 v4", "node07", "native", "AMD EPYC 9654");
  const std::string s(line);
  EXPECT_EQ(len, s.size());
  EXPECT_EQ(s,
            "ringmaster: this CPU (Intel(R) Xeon(R) CPU E5-2690 v4, host node07) lacks avx512f, "
            "avx512bw, which this build uses (compiled with -march=native on 'AMD EPYC 9654'): "
            "rebuild with cmake -DRM_CPU_ARCH=x86-64-v3 (this CPU's level) or =portable (any "
            "x86-64 CPU), or build it on the oldest CPU it must run on\n");

  // A named -march has no build machine; a CPU below v2 is offered only portable.
  format_isa_refusal(line, sizeof line, "ringmaster", v3, kIsaSse3, "QEMU Virtual CPU", "n1",
                     "x86-64-v3", "");
  EXPECT_NE(std::string(line).find("(compiled with -march=x86-64-v3): rebuild with cmake "
                                   "-DRM_CPU_ARCH=portable, or build"),
            std::string::npos)
      << line;
  EXPECT_NE(std::string(line).find("lacks ssse3, sse4.1,"), std::string::npos) << line;
}

}  // namespace
}  // namespace rm::cpu

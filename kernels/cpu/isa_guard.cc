// Compiled for the x86-64 baseline whatever RM_CPU_ARCH is (kernels/cpu/CMakeLists.txt), and
// written with C library calls only: see isa_guard.h.
#include "kernels/cpu/isa_guard.h"

#include <errno.h>  // program_invocation_short_name
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define RM_ISA_X86 1
#endif

// What kernels/cpu/CMakeLists.txt names to the linker (--undefined) so that every program linked
// with rm_isa_guard (through the kernels or the collectives) takes this file and its check.
extern "C" {
extern const int rm_isa_guard;
const int rm_isa_guard = 1;
}

namespace rm::cpu {
namespace {

struct Feature {
  IsaFeature bit;
  const char* name;
};

// Every extension of isa_guard.h with its name (GCC's, as -m flags and __builtin_cpu_supports
// spell them), lowest bit first.
constexpr Feature kFeatures[] = {
    {kIsaSse3, "sse3"},
    {kIsaSsse3, "ssse3"},
    {kIsaSse41, "sse4.1"},
    {kIsaSse42, "sse4.2"},
    {kIsaPopcnt, "popcnt"},
    {kIsaAvx, "avx"},
    {kIsaAvx2, "avx2"},
    {kIsaFma, "fma"},
    {kIsaF16c, "f16c"},
    {kIsaBmi, "bmi"},
    {kIsaBmi2, "bmi2"},
    {kIsaLzcnt, "lzcnt"},
    {kIsaMovbe, "movbe"},
    {kIsaAes, "aes"},
    {kIsaPclmul, "pclmul"},
    {kIsaAvx512f, "avx512f"},
    {kIsaAvx512cd, "avx512cd"},
    {kIsaAvx512bw, "avx512bw"},
    {kIsaAvx512dq, "avx512dq"},
    {kIsaAvx512vl, "avx512vl"},
    {kIsaAvx512ifma, "avx512ifma"},
    {kIsaAvx512vbmi, "avx512vbmi"},
    {kIsaAvx512vbmi2, "avx512vbmi2"},
    {kIsaAvx512vnni, "avx512vnni"},
    {kIsaAvx512bitalg, "avx512bitalg"},
    {kIsaAvx512vpopcntdq, "avx512vpopcntdq"},
    {kIsaAvx512bf16, "avx512bf16"},
    {kIsaAvx512fp16, "avx512fp16"},
    {kIsaAvxvnni, "avxvnni"},
    {kIsaGfni, "gfni"},
    {kIsaVaes, "vaes"},
    {kIsaVpclmulqdq, "vpclmulqdq"},
    {kIsaFma4, "fma4"},
    {kIsaXop, "xop"},
};

// Appends text at out + used, cut to fit n; *used grows by its whole length, as snprintf counts.
void append(char* out, size_t n, size_t* used, const char* text) {
  const size_t len = strlen(text);
  if (*used < n) {
    const size_t room = n - *used - 1;  // n > 0 here: *used < n
    const size_t copy = len < room ? len : room;
    memcpy(out + *used, text, copy);
    out[*used + copy] = '\0';
  }
  *used += len;
}

// The CPU's brand string (CPUID leaves 0x80000002-4), spaces trimmed; "" where there is none.
void cpu_brand(char* out, size_t n) {
  out[0] = '\0';
#ifdef RM_ISA_X86
  unsigned regs[12] = {};
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000004u) return;
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    __get_cpuid(0x80000002u + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2],
                &regs[4 * leaf + 3]);
  }
  char raw[49] = {};
  memcpy(raw, regs, 48);
  const char* start = raw;
  while (*start == ' ') ++start;
  size_t len = strlen(start);
  while (len > 0 && start[len - 1] == ' ') --len;
  if (len >= n) len = n - 1;
  memcpy(out, start, len);
  out[len] = '\0';
#else
  (void)n;
#endif
}

// Before every initialiser of default priority (C++ static objects are 65535), so before any
// code of ours compiled for the newer CPU has run.
__attribute__((constructor(101))) void refuse_a_cpu_without_the_build_isa() {
  const uint64_t present = cpu_isa_features();
  if ((kBuiltIsaFeatures & ~present) == 0) return;
  char brand[64], host[256], line[2048];
  cpu_brand(brand, sizeof brand);
  if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
  host[sizeof host - 1] = '\0';
  size_t len = format_isa_refusal(
      line, sizeof line, program_invocation_short_name, kBuiltIsaFeatures, present,
      brand[0] != '\0' ? brand : "an x86-64 CPU", host, kBuiltIsaArch, kBuiltIsaHostCpu);
  if (len >= sizeof line) len = sizeof line - 1;
  ssize_t written = write(STDERR_FILENO, line, len);
  (void)written;
  _exit(2);  // kExitBadInput: the job never started, and a restart here fails the same way
}

}  // namespace

uint64_t decode_isa_features(const IsaRegisters& r) {
  auto bit = [](uint32_t reg, int n) { return ((reg >> n) & 1u) != 0; };
  uint64_t have = 0;
  auto set = [&have](bool on, IsaFeature f) {
    if (on) have |= f;
  };
  if (r.max_leaf < 1) return 0;
  // The VEX- and EVEX-encoded instructions fault unless the OS saves their registers: XCR0 bits
  // 1-2 (SSE, YMM) for AVX, and 5-7 (opmask, ZMM halves) too for AVX-512. XCR0 means something
  // only where the OS enabled XSAVE (OSXSAVE).
  const bool os_avx = bit(r.leaf1_ecx, 27) && (r.xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (r.xcr0 & 0xe0) == 0xe0;
  set(bit(r.leaf1_ecx, 0), kIsaSse3);
  set(bit(r.leaf1_ecx, 1), kIsaPclmul);
  set(bit(r.leaf1_ecx, 9), kIsaSsse3);
  set(bit(r.leaf1_ecx, 19), kIsaSse41);
  set(bit(r.leaf1_ecx, 20), kIsaSse42);
  set(bit(r.leaf1_ecx, 22), kIsaMovbe);
  set(bit(r.leaf1_ecx, 23), kIsaPopcnt);
  set(bit(r.leaf1_ecx, 25), kIsaAes);
  set(os_avx && bit(r.leaf1_ecx, 12), kIsaFma);
  set(os_avx && bit(r.leaf1_ecx, 28), kIsaAvx);
  set(os_avx && bit(r.leaf1_ecx, 29), kIsaF16c);
  set(bit(r.ext1_ecx, 5), kIsaLzcnt);  // AMD's ABM bit; Intel sets it for LZCNT too
  set(os_avx && bit(r.ext1_ecx, 16), kIsaFma4);
  set(os_avx && bit(r.ext1_ecx, 11), kIsaXop);
  if (r.max_leaf >= 7) {
    set(bit(r.leaf7_ebx, 3), kIsaBmi);
    set(bit(r.leaf7_ebx, 8), kIsaBmi2);
    set(os_avx && bit(r.leaf7_ebx, 5), kIsaAvx2);
    set(bit(r.leaf7_ecx, 8), kIsaGfni);  // has a legacy SSE encoding
    set(os_avx && bit(r.leaf7_ecx, 9), kIsaVaes);
    set(os_avx && bit(r.leaf7_ecx, 10), kIsaVpclmulqdq);
    set(os_avx && bit(r.leaf7_1_eax, 4), kIsaAvxvnni);
    if (os_avx512) {
      set(bit(r.leaf7_ebx, 16), kIsaAvx512f);
      set(bit(r.leaf7_ebx, 17), kIsaAvx512dq);
      set(bit(r.leaf7_ebx, 21), kIsaAvx512ifma);
      set(bit(r.leaf7_ebx, 28), kIsaAvx512cd);
      set(bit(r.leaf7_ebx, 30), kIsaAvx512bw);
      set(bit(r.leaf7_ebx, 31), kIsaAvx512vl);
      set(bit(r.leaf7_ecx, 1), kIsaAvx512vbmi);
      set(bit(r.leaf7_ecx, 6), kIsaAvx512vbmi2);
      set(bit(r.leaf7_ecx, 11), kIsaAvx512vnni);
      set(bit(r.leaf7_ecx, 12), kIsaAvx512bitalg);
      set(bit(r.leaf7_ecx, 14), kIsaAvx512vpopcntdq);
      set(bit(r.leaf7_edx, 23), kIsaAvx512fp16);
      set(bit(r.leaf7_1_eax, 5), kIsaAvx512bf16);
    }
  }
  return have;
}

IsaRegisters read_isa_registers() {
  IsaRegisters r;
#ifdef RM_ISA_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  r.max_leaf = static_cast<unsigned>(__get_cpuid_max(0, nullptr));
  if (r.max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) r.leaf1_ecx = c;
  if (r.max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    r.leaf7_ebx = b;
    r.leaf7_ecx = c;
    r.leaf7_edx = d;
    if (a >= 1) {  // EAX of sub-leaf 0: the highest sub-leaf
      __cpuid_count(7, 1, a, b, c, d);
      r.leaf7_1_eax = a;
    }
  }
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) >= 0x80000001u &&
      __get_cpuid(0x80000001u, &a, &b, &c, &d)) {
    r.ext1_ecx = c;
  }
  if ((r.leaf1_ecx >> 27) & 1u) {  // OSXSAVE: XGETBV may run
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    r.xcr0 = (uint64_t{hi} << 32) | lo;
  }
#endif
  return r;
}

uint64_t cpu_isa_features() {
  return decode_isa_features(read_isa_registers());
}

size_t isa_feature_names(uint64_t bits, char* out, size_t n) {
  if (n > 0) out[0] = '\0';
  size_t used = 0;
  for (const Feature& f : kFeatures) {
    if ((bits & f.bit) == 0) continue;
    if (used > 0) append(out, n, &used, ", ");
    append(out, n, &used, f.name);
  }
  return used;
}

uint64_t best_isa_level_bits(uint64_t present) {
  const uint64_t levels[] = {kIsaLevelV4, kIsaLevelV3,
                             kIsaLevelV2};  // a plain array: no C++ library
  for (const uint64_t level : levels) {
    if ((present & level) == level) return level;
  }
  return 0;
}

const char* best_isa_level(uint64_t present) {
  const uint64_t level = best_isa_level_bits(present);
  return level == kIsaLevelV4   ? "x86-64-v4"
         : level == kIsaLevelV3 ? "x86-64-v3"
         : level == kIsaLevelV2 ? "x86-64-v2"
                                : "portable";
}

size_t format_isa_refusal(char* out, size_t n, const char* program, uint64_t required,
                          uint64_t present, const char* cpu, const char* host, const char* arch,
                          const char* built_on) {
  char names[512];
  isa_feature_names(required & ~present, names, sizeof names);
  char built[256];
  if (strcmp(arch, "portable") == 0 || arch[0] == '\0') {
    // No -march: the extensions came from CMAKE_CXX_FLAGS (-mavx2, ...).
    snprintf(built, sizeof built, "RM_CPU_ARCH=portable and the -m flags of CMAKE_CXX_FLAGS");
  } else if (built_on[0] != '\0') {
    snprintf(built, sizeof built, "-march=%s on '%s'", arch, built_on);
  } else {
    snprintf(built, sizeof built, "-march=%s", arch);
  }
  const char* level = best_isa_level(present);
  char advice[256];
  if (strcmp(level, "portable") == 0) {
    snprintf(advice, sizeof advice, "rebuild with cmake -DRM_CPU_ARCH=portable");
  } else {
    snprintf(advice, sizeof advice,
             "rebuild with cmake -DRM_CPU_ARCH=%s (this CPU's level) or =portable (any x86-64 "
             "CPU)",
             level);
  }
  const int len = snprintf(out, n,
                           "%s: this CPU (%s, host %s) lacks %s, which this build uses (compiled "
                           "with %s): %s, or build it on the oldest CPU it must run on\n",
                           program, cpu, host, names, built, advice);
  return len < 0 ? 0 : static_cast<size_t>(len);
}

}  // namespace rm::cpu

#include "kernels/cpu/cpu_features.h"

#include <cstring>

#include "kernels/cpu/isa_guard.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define RM_X86 1
#endif

namespace rm::cpu {
namespace {

bool bit(uint32_t reg, int n) { return ((reg >> n) & 1u) != 0; }

std::string trimmed(std::string s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return {};
  const size_t b = s.find_last_not_of(' ');
  return s.substr(a, b - a + 1);
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kSse: return "SSE";
    case SimdLevel::kAvx: return "AVX";
    case SimdLevel::kAvx2: return "AVX2+FMA";
    case SimdLevel::kAvx512: return "AVX-512";
    case SimdLevel::kAvx512Bf16: return "AVX-512 with BF16";
  }
  return "?";
}

SimdLevel CpuFeatures::level() const {
  const bool skx = avx512f && avx512cd && avx512bw && avx512dq && avx512vl && os_avx512 &&
                   avx2 && fma && os_avx;
  if (skx && avx512_bf16) return SimdLevel::kAvx512Bf16;
  if (skx) return SimdLevel::kAvx512;
  if (avx2 && fma && os_avx) return SimdLevel::kAvx2;
  if (avx && os_avx) return SimdLevel::kAvx;
  return SimdLevel::kSse;
}

std::string CpuFeatures::summary() const {
  std::string s = brand.empty() ? vendor : brand;
  s += " (family " + std::to_string(family) + " model " + std::to_string(model) + ", ";
  const SimdLevel l = level();
  s += l == SimdLevel::kAvx512Bf16 ? "AVX-512" : simd_level_name(l);
  if (l >= SimdLevel::kAvx512) {
    if (avx512_bf16 && avx512_fp16) s += " with BF16 and FP16";
    else if (avx512_bf16) s += " with BF16";
    if (amx_tile) s += ", AMX";
  }
  return s + ")";
}

CpuFeatures decode_cpuid(const CpuidRegisters& r) {
  CpuFeatures f;
  f.vendor = r.vendor;
  f.brand = trimmed(r.brand);
  if (r.max_leaf < 1) return f;
  const int base_family = static_cast<int>((r.leaf1_eax >> 8) & 0xf);
  const int base_model = static_cast<int>((r.leaf1_eax >> 4) & 0xf);
  f.family = base_family == 0xf ? base_family + static_cast<int>((r.leaf1_eax >> 20) & 0xff)
                                : base_family;
  f.model = (base_family == 0x6 || base_family == 0xf)
                ? base_model | static_cast<int>(((r.leaf1_eax >> 16) & 0xf) << 4)
                : base_model;
  f.fma = bit(r.leaf1_ecx, 12);
  f.avx = bit(r.leaf1_ecx, 28);
  // XCR0 is meaningful only when the OS enabled XSAVE (OSXSAVE). Bits 1-2: SSE and YMM state;
  // bits 5-7: opmask, upper halves of ZMM0-15, ZMM16-31.
  const bool osxsave = bit(r.leaf1_ecx, 27);
  f.os_avx = osxsave && (r.xcr0 & 0x6) == 0x6;
  f.os_avx512 = f.os_avx && (r.xcr0 & 0xe0) == 0xe0;
  if (r.max_leaf >= 7) {
    f.avx2 = bit(r.leaf7_ebx, 5);
    f.avx512f = bit(r.leaf7_ebx, 16);
    f.avx512dq = bit(r.leaf7_ebx, 17);
    f.avx512cd = bit(r.leaf7_ebx, 28);
    f.avx512bw = bit(r.leaf7_ebx, 30);
    f.avx512vl = bit(r.leaf7_ebx, 31);
    f.avx512_fp16 = bit(r.leaf7_edx, 23);
    f.amx_tile = bit(r.leaf7_edx, 24);
    f.avx512_bf16 = bit(r.leaf7_1_eax, 5);
  }
  return f;
}

CpuidRegisters read_cpuid() {
  CpuidRegisters r;
#ifdef RM_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return r;
  r.max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  r.vendor = vendor;
  if (r.max_leaf >= 1) {
    __cpuid(1, a, b, c, d);
    r.leaf1_eax = a;
    r.leaf1_ecx = c;
    if (bit(c, 27)) {  // OSXSAVE: XGETBV may be executed
      uint32_t lo = 0, hi = 0;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      r.xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    }
  }
  if (r.max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    r.leaf7_ebx = b;
    r.leaf7_edx = d;
    const unsigned subleaves = a;
    if (subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      r.leaf7_1_eax = a;
    }
  }
  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __cpuid(0x80000002u + i, a, b, c, d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    r.brand = brand;
  }
#endif
  return r;
}

const CpuFeatures& host_cpu_features() {
  static const CpuFeatures features = decode_cpuid(read_cpuid());
  return features;
}

std::string build_isa_summary() {
  std::string s = kBuiltIsaArch[0] != '\0' ? kBuiltIsaArch : "portable";
  if (kBuiltIsaHostCpu[0] != '\0') s += std::string(" (") + kBuiltIsaHostCpu + ")";
  const char* level = best_isa_level(kBuiltIsaFeatures);
  const uint64_t level_bits = best_isa_level_bits(kBuiltIsaFeatures);
  char extra[512];
  isa_feature_names(kBuiltIsaFeatures & ~level_bits, extra, sizeof extra);
  // "x86-64-v3" says it all; "native" is followed by what it meant here.
  if (s.rfind(level, 0) != 0 || extra[0] != '\0') {
    s += std::string(": ") + (level_bits != 0 ? level : "the x86-64 baseline");
    if (extra[0] != '\0') s += std::string(" + ") + extra;
  }
  return s;
}

}  // namespace rm::cpu

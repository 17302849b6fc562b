// The instruction set guard: a program built for one CPU (RM_CPU_ARCH, say -march=native on an
// AVX-512 login node) and started on an older one (a compute node without AVX-512) would die of
// SIGILL at whichever vector instruction it meets first -- in a rank, mid-job, with no message.
// Every program linked with rm_isa_guard (rm_kernels_cpu, rm_collectives and rm_kernels_cuda
// link it) instead checks, before any other initialiser of ours runs, that this CPU has each
// extension the build was compiled to use; where one is missing it writes one message to stderr
// naming them, the CPU, the host and the way out, and exits with code 2 (base/exit_codes.h
// kExitBadInput: the job never started, and restarting cannot help).
//
// isa_guard.cc is compiled for the plain x86-64 baseline (kernels/cpu/CMakeLists.txt), so the
// check itself runs on any x86-64 CPU; it uses C library calls only, because an inline C++
// function it shared with the rest of the build could be linked from a copy compiled for the
// newer CPU. What the build uses comes from built_isa.cc, compiled like the rest: it holds data
// made from the compiler's predefined macros (__AVX2__, __AVX512F__, ...), no code.
//
// Not x86-64 (or not GCC/Clang): no extensions are listed, the check passes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rm::cpu {

// One bit per extension the compiler may use on its own (auto-vectorised loops, bit tricks),
// plus the few that -march turns on with them. The names are GCC's (__builtin_cpu_supports).
// Left out, as GCC never emits them unasked: SSE4A, PREFETCHW, AVX512-VP2INTERSECT (a build on
// an AMD host enables some; an Intel node without them runs it). An extension that GCC 12
// does not know (APX, AVX10, ...) stops the build (built_isa.cc) until it is added here.
enum IsaFeature : uint64_t {
  kIsaSse3 = 1ull << 0,
  kIsaSsse3 = 1ull << 1,
  kIsaSse41 = 1ull << 2,
  kIsaSse42 = 1ull << 3,
  kIsaPopcnt = 1ull << 4,
  kIsaAvx = 1ull << 5,
  kIsaAvx2 = 1ull << 6,
  kIsaFma = 1ull << 7,
  kIsaF16c = 1ull << 8,
  kIsaBmi = 1ull << 9,
  kIsaBmi2 = 1ull << 10,
  kIsaLzcnt = 1ull << 11,
  kIsaMovbe = 1ull << 12,
  kIsaAes = 1ull << 13,
  kIsaPclmul = 1ull << 14,
  kIsaAvx512f = 1ull << 15,
  kIsaAvx512cd = 1ull << 16,
  kIsaAvx512bw = 1ull << 17,
  kIsaAvx512dq = 1ull << 18,
  kIsaAvx512vl = 1ull << 19,
  kIsaAvx512ifma = 1ull << 20,
  kIsaAvx512vbmi = 1ull << 21,
  kIsaAvx512vbmi2 = 1ull << 22,
  kIsaAvx512vnni = 1ull << 23,
  kIsaAvx512bitalg = 1ull << 24,
  kIsaAvx512vpopcntdq = 1ull << 25,
  kIsaAvx512bf16 = 1ull << 26,
  kIsaAvx512fp16 = 1ull << 27,
  kIsaAvxvnni = 1ull << 28,
  kIsaGfni = 1ull << 29,
  kIsaVaes = 1ull << 30,
  kIsaVpclmulqdq = 1ull << 31,
  kIsaFma4 = 1ull << 32,  // AMD's Bulldozer family only
  kIsaXop = 1ull << 33,
};

// The x86-64 micro-architecture levels of the psABI, as sets of the extensions above.
constexpr uint64_t kIsaLevelV2 = kIsaSse3 | kIsaSsse3 | kIsaSse41 | kIsaSse42 | kIsaPopcnt;
constexpr uint64_t kIsaLevelV3 = kIsaLevelV2 | kIsaAvx | kIsaAvx2 | kIsaFma | kIsaF16c | kIsaBmi |
                                 kIsaBmi2 | kIsaLzcnt | kIsaMovbe;
constexpr uint64_t kIsaLevelV4 =
    kIsaLevelV3 | kIsaAvx512f | kIsaAvx512cd | kIsaAvx512bw | kIsaAvx512dq | kIsaAvx512vl;

// What this build was compiled to use (built_isa.cc): constants, so that reading them before
// main runs no code compiled for the newer CPU.
extern const uint64_t kBuiltIsaFeatures;
// The -march this build was compiled with ("native", "x86-64-v3"; "" for the compiler's
// default), and for "native" the CPU it was built on ("AMD EPYC 9654"; "" otherwise).
extern const char kBuiltIsaArch[];
extern const char kBuiltIsaHostCpu[];

// The CPUID and XGETBV words the extensions are read from.
struct IsaRegisters {
  uint32_t max_leaf = 0;     // leaf 0 EAX
  uint32_t leaf1_ecx = 0;    // SSE3 .. AVX, F16C; OSXSAVE (27)
  uint32_t leaf7_ebx = 0;    // BMI, AVX2, BMI2, AVX512F/DQ/IFMA/CD/BW/VL
  uint32_t leaf7_ecx = 0;    // AVX512VBMI/VBMI2, GFNI, VAES, VPCLMULQDQ, AVX512VNNI/BITALG/...
  uint32_t leaf7_edx = 0;    // AVX512FP16 (23)
  uint32_t leaf7_1_eax = 0;  // AVXVNNI (4), AVX512BF16 (5)
  uint32_t ext1_ecx = 0;     // leaf 0x80000001 ECX: LZCNT/ABM (5)
  uint64_t xcr0 = 0;         // XGETBV(0): the register state the OS saves
};

// The extensions the registers say this CPU has and its OS has enabled (an AVX or AVX-512
// extension counts only where the OS saves the YMM or ZMM state). A pure function: any CPU is
// a test case.
uint64_t decode_isa_features(const IsaRegisters& r);
// This CPU's registers (executes CPUID / XGETBV); all zero off x86-64.
IsaRegisters read_isa_registers();
// decode_isa_features(read_isa_registers()). Callable before main.
uint64_t cpu_isa_features();

// The names of the set bits, lowest first, separated by ", " ("avx512f, avx512bw"), written to
// out (always NUL-terminated when n > 0, cut short if it does not fit). Returns the length the
// whole list needs, as snprintf does.
size_t isa_feature_names(uint64_t bits, char* out, size_t n);

// The highest x86-64 micro-architecture level (psABI) all of whose extensions are in `present`:
// "x86-64-v4", "x86-64-v3", "x86-64-v2", or "portable" (the baseline) -- an RM_CPU_ARCH value.
const char* best_isa_level(uint64_t present);
// That level's extensions (kIsaLevelV4, V3, V2), 0 for the baseline.
uint64_t best_isa_level_bits(uint64_t present);

// The refusal, one line ending in '\n', written to out like isa_feature_names: what of
// `required` is not `present`, the CPU and host, how the build was made (`arch` = RM_CPU_ARCH,
// `built_on` = the build machine's CPU for "native"), and the RM_CPU_ARCH to rebuild with.
size_t format_isa_refusal(char* out, size_t n, const char* program, uint64_t required,
                          uint64_t present, const char* cpu, const char* host, const char* arch,
                          const char* built_on);

}  // namespace rm::cpu

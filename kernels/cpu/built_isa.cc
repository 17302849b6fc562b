// What this build was compiled to use, read from the compiler's own predefined macros: this file
// is compiled with the flags of every other kernel (RM_CPU_ARCH and any CMAKE_CXX_FLAGS), so what
// it lists is what they may contain. Data only (isa_guard.h says why).
#include "kernels/cpu/isa_guard.h"

// Set by kernels/cpu/CMakeLists.txt for this file alone.
#ifndef RM_CPU_ARCH_NAME
#define RM_CPU_ARCH_NAME ""
#endif
#ifndef RM_CPU_BUILD_HOST
#define RM_CPU_BUILD_HOST ""
#endif

namespace rm::cpu {

// Each extension the compiler was told it may use, by its predefined macro.
// clang-format off
const uint64_t kBuiltIsaFeatures = uint64_t{0}
#ifdef __SSE3__
    | kIsaSse3
#endif
#ifdef __SSSE3__
    | kIsaSsse3
#endif
#ifdef __SSE4_1__
    | kIsaSse41
#endif
#ifdef __SSE4_2__
    | kIsaSse42
#endif
#ifdef __POPCNT__
    | kIsaPopcnt
#endif
#ifdef __AVX__
    | kIsaAvx
#endif
#ifdef __AVX2__
    | kIsaAvx2
#endif
#ifdef __FMA__
    | kIsaFma
#endif
#ifdef __F16C__
    | kIsaF16c
#endif
#ifdef __BMI__
    | kIsaBmi
#endif
#ifdef __BMI2__
    | kIsaBmi2
#endif
#ifdef __LZCNT__
    | kIsaLzcnt
#endif
#ifdef __MOVBE__
    | kIsaMovbe
#endif
#ifdef __AES__
    | kIsaAes
#endif
#ifdef __PCLMUL__
    | kIsaPclmul
#endif
#ifdef __AVX512F__
    | kIsaAvx512f
#endif
#ifdef __AVX512CD__
    | kIsaAvx512cd
#endif
#ifdef __AVX512BW__
    | kIsaAvx512bw
#endif
#ifdef __AVX512DQ__
    | kIsaAvx512dq
#endif
#ifdef __AVX512VL__
    | kIsaAvx512vl
#endif
#ifdef __AVX512IFMA__
    | kIsaAvx512ifma
#endif
#ifdef __AVX512VBMI__
    | kIsaAvx512vbmi
#endif
#ifdef __AVX512VBMI2__
    | kIsaAvx512vbmi2
#endif
#ifdef __AVX512VNNI__
    | kIsaAvx512vnni
#endif
#ifdef __AVX512BITALG__
    | kIsaAvx512bitalg
#endif
#ifdef __AVX512VPOPCNTDQ__
    | kIsaAvx512vpopcntdq
#endif
#ifdef __AVX512BF16__
    | kIsaAvx512bf16
#endif
#ifdef __AVX512FP16__
    | kIsaAvx512fp16
#endif
#ifdef __AVXVNNI__
    | kIsaAvxvnni
#endif
#ifdef __GFNI__
    | kIsaGfni
#endif
#ifdef __VAES__
    | kIsaVaes
#endif
#ifdef __VPCLMULQDQ__
    | kIsaVpclmulqdq
#endif
#ifdef __FMA4__
    | kIsaFma4
#endif
#ifdef __XOP__
    | kIsaXop
#endif
    ;
// clang-format on

// Fails closed: extensions newer than GCC 12 that a newer compiler may emit on its own under
// -march=native (on a host that has them). Unlisted, a build using them would pass the check
// on a CPU without them. Until isa_guard.h knows them, build with -DRM_CPU_ARCH=x86-64-v4.
#if defined(__APX_F__) || defined(__AVX10_1__) || defined(__AVX10_2__) ||            \
    defined(__AVXVNNIINT8__) || defined(__AVXVNNIINT16__) || defined(__AVXIFMA__) || \
    defined(__AVXNECONVERT__)
#error "this compiler enables an extension kernels/cpu/isa_guard.h does not know: add it there"
#endif

const char kBuiltIsaArch[] = RM_CPU_ARCH_NAME;
const char kBuiltIsaHostCpu[] = RM_CPU_BUILD_HOST;

}  // namespace rm::cpu

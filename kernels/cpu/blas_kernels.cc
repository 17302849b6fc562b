#include "kernels/cpu/blas_kernels.h"

#include <cblas.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rm::cpu {
namespace {

struct CoreLevel {
  const char* name;
  SimdLevel level;
};

// OpenBLAS's x86-64 core names (driver/others/dynamic.c) by the widest SIMD their sgemm uses.
constexpr CoreLevel kCores[] = {
    {"Katmai", SimdLevel::kSse},         {"Coppermine", SimdLevel::kSse},
    {"Northwood", SimdLevel::kSse},      {"Prescott", SimdLevel::kSse},
    {"Banias", SimdLevel::kSse},         {"Atom", SimdLevel::kSse},
    {"Core2", SimdLevel::kSse},          {"Penryn", SimdLevel::kSse},
    {"Dunnington", SimdLevel::kSse},     {"Nehalem", SimdLevel::kSse},
    {"Athlon", SimdLevel::kSse},         {"Opteron", SimdLevel::kSse},
    {"Opteron_SSE3", SimdLevel::kSse},   {"Barcelona", SimdLevel::kSse},
    {"Nano", SimdLevel::kSse},           {"Bobcat", SimdLevel::kSse},
    {"Sandybridge", SimdLevel::kAvx},    {"Bulldozer", SimdLevel::kAvx},
    {"Piledriver", SimdLevel::kAvx},     {"Steamroller", SimdLevel::kAvx},
    {"Haswell", SimdLevel::kAvx2},       {"Excavator", SimdLevel::kAvx2},
    {"Zen", SimdLevel::kAvx2},           {"SkylakeX", SimdLevel::kAvx512},
    {"Cooperlake", SimdLevel::kAvx512Bf16}, {"SapphireRapids", SimdLevel::kAvx512Bf16},
};

// BF16 changes only the bf16 GEMMs (sbgemm), not sgemm: a SkylakeX choice on a BF16 CPU is
// not "generic", so levels are compared with BF16 folded into AVX-512.
SimdLevel sgemm_level(SimdLevel l) {
  return l == SimdLevel::kAvx512Bf16 ? SimdLevel::kAvx512 : l;
}

// Filled by select_blas_kernels.
std::string g_why;

}  // namespace

std::optional<SimdLevel> blas_core_level(const std::string& core) {
  for (const CoreLevel& c : kCores) {
    if (strcasecmp(c.name, core.c_str()) == 0) return c.level;
  }
  return std::nullopt;
}

std::string best_blas_core(const CpuFeatures& cpu) {
  const bool amd = cpu.vendor == "AuthenticAMD" || cpu.vendor == "HygonGenuine";
  switch (cpu.level()) {
    case SimdLevel::kAvx512Bf16: return "Cooperlake";
    case SimdLevel::kAvx512: return "SkylakeX";
    case SimdLevel::kAvx2: return amd ? "Zen" : "Haswell";
    case SimdLevel::kAvx: return "Sandybridge";
    case SimdLevel::kSse: return "";
  }
  return "";
}

BlasCoreChoice choose_blas_core(const CpuFeatures& cpu, const std::string& library_core,
                                const char* user_coretype) {
  BlasCoreChoice c;
  c.core = library_core;
  const SimdLevel cpu_level = cpu.level();
  if (user_coretype != nullptr && *user_coretype != '\0') {
    c.why = std::string("OPENBLAS_CORETYPE=") + user_coretype + " set by the user";
    // Kept, but not silently when it holds the CPU back: an environment that sets it for an
    // older machine (seen on a Zen 5 VM: Haswell, sgemm at 56% of Cooperlake's speed).
    const std::optional<SimdLevel> user_level = blas_core_level(user_coretype);
    const std::string best = best_blas_core(cpu);
    if (user_level && sgemm_level(*user_level) < sgemm_level(cpu_level) && !best.empty()) {
      c.why += "; slower than this CPU allows: it has " + std::string(simd_level_name(cpu_level)) +
               ", for which ringmaster would choose " + best + " (unset the variable to let it)";
    }
    return c;
  }
  const std::optional<SimdLevel> lib_level = blas_core_level(library_core);
  if (!lib_level) {
    c.why = "the library's own choice (a core ringmaster does not know; kept)";
    return c;
  }
  if (sgemm_level(*lib_level) >= sgemm_level(cpu_level)) {
    c.why = std::string("the library's own choice, right for this CPU's ") +
            simd_level_name(cpu_level);
    return c;
  }
  c.core = best_blas_core(cpu);
  c.replace = !c.core.empty();
  c.why = "chosen by ringmaster: the library picked " + library_core + " (" +
          simd_level_name(*lib_level) + " kernels) on a CPU with " + simd_level_name(cpu_level) +
          ", family " + std::to_string(cpu.family) + " model " + std::to_string(cpu.model);
  return c;
}

std::string blas_core_name() { return openblas_get_corename(); }

std::string blas_library() {
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words.
  std::string config = openblas_get_config();
  const size_t first = config.find(' ');
  const size_t second = first == std::string::npos ? first : config.find(' ', first + 1);
  return config.substr(0, second);
}

void select_blas_kernels(char** argv) {
  if (const char* from = std::getenv(kBlasReexecEnv)) {
    // The re-executed process: the library loaded with our OPENBLAS_CORETYPE. Remove both, so
    // that the processes it starts (mpirun's ranks, possibly on other hosts) decide afresh.
    const CpuFeatures& cpu = host_cpu_features();
    g_why = choose_blas_core(cpu, from, nullptr).why;
    unsetenv(kBlasReexecEnv);
    unsetenv("OPENBLAS_CORETYPE");
    return;
  }
  const char* assumed = std::getenv(kBlasAssumeCoreEnv);
  const std::string library_core = assumed != nullptr ? assumed : blas_core_name();
  const BlasCoreChoice c =
      choose_blas_core(host_cpu_features(), library_core, std::getenv("OPENBLAS_CORETYPE"));
  g_why = c.why;
  if (!c.replace) return;
  setenv("OPENBLAS_CORETYPE", c.core.c_str(), 1);
  setenv(kBlasReexecEnv, library_core.c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  const int err = errno;
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kBlasReexecEnv);
  g_why = "the library's own choice; ringmaster wanted " + c.core + " but could not re-execute (" +
          std::strerror(err) + ")";
  std::fprintf(stderr, "ringmaster: warning: BLAS kernels %s: %s\n", blas_core_name().c_str(),
               g_why.c_str());
}

std::string blas_description() {
  return blas_library() + ", " + blas_core_name() + " kernels (" +
         (g_why.empty() ? std::string("the library's own choice") : g_why) + ")";
}

}  // namespace rm::cpu

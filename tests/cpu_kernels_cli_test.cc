// The BLAS kernels a real `ringmaster` process runs (kernels/cpu/blas_kernels.h), seen from
// outside: the banner names a kernel set fit for this CPU and why; a library choice below the
// CPU is replaced by re-executing with OPENBLAS_CORETYPE, in the launcher and in every rank under
// mpirun; the user's OPENBLAS_CORETYPE wins; and a 1024^3 sgemm reaches a real share of the
// measured FMA peak.
//
// RM_BLAS_ASSUME_CORE=Prescott makes a process decide as if the library had picked Prescott (as
// Debian 12's OpenBLAS does on CPUs newer than itself): the re-execution, the library's reaction
// to the variable and the banner after it are the real ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>
#include <string>

#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/cpu_features.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

using test::run_cli;

bool avx2_or_better() { return cpu::host_cpu_features().level() >= cpu::SimdLevel::kAvx2; }

// "blas: OpenBLAS 0.3.21, SkylakeX kernels (why)" -> SkylakeX
std::string kernels_named(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(OpenBLAS [0-9.]+, (\w+) kernels \()"))) return "";
  return m[1];
}

TEST(CpuKernelsCli, TheBannerNamesAKernelSetForThisCpuAndSgemmReachesItsPeak) {
  if (!avx2_or_better()) GTEST_SKIP() << "this CPU has no AVX2: the generic kernels are right";
  TempDir dir;
  const test::CliResult r = run_cli("bench cpu --threads 1", dir.path(), "env -u OPENBLAS_CORETYPE");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string core = kernels_named(r.out);
  const std::optional<cpu::SimdLevel> level = cpu::blas_core_level(core);
  ASSERT_TRUE(level.has_value()) << r.out;
  EXPECT_GE(*level, cpu::SimdLevel::kAvx2) << "generic kernels on an AVX2+ CPU:\n" << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(1 thread ([0-9.]+) GFLOP/s = (\d+)% of peak)")))
      << r.out;
  // Prescott's SSE kernels reach about a fifth of an AVX-512 core, the AVX-512 ones 70-90%.
  EXPECT_GE(std::stoi(m[2]), 25) << r.out;
}

TEST(CpuKernelsCli, AGenericLibraryChoiceIsReplacedByReexecution) {
  if (!avx2_or_better()) GTEST_SKIP() << "this CPU has no AVX2: nothing better to choose";
  TempDir dir;
  const test::CliResult r = run_cli("bench cpu --threads 1", dir.path(),
                                    "env -u OPENBLAS_CORETYPE RM_BLAS_ASSUME_CORE=Prescott");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("chosen by ringmaster: the library picked Prescott"), std::string::npos)
      << r.out;
  // What the library reports after the re-execution: the set chosen for this CPU (the library
  // may step down from Cooperlake to SkylakeX itself if BF16 is missing).
  EXPECT_GE(cpu::blas_core_level(kernels_named(r.out)).value_or(cpu::SimdLevel::kSse),
            cpu::SimdLevel::kAvx2)
      << r.out;
}

TEST(CpuKernelsCli, TheUsersCoretypeWins) {
  TempDir dir;
  const test::CliResult r =
      run_cli("bench cpu --threads 1", dir.path(), "env OPENBLAS_CORETYPE=Prescott");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(kernels_named(r.out), "Prescott") << r.out;
  EXPECT_NE(r.out.find("OPENBLAS_CORETYPE=Prescott set by the user"), std::string::npos) << r.out;
}

TEST(CpuKernelsCli, EveryRankUnderMpirunChoosesForItsCpu) {
  if (!avx2_or_better()) GTEST_SKIP() << "this CPU has no AVX2: nothing better to choose";
  TempDir dir;
  const std::string job = dir.write("job.yaml", R"(name: kernels
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 16, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 2, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 0}
)");
  const test::CliResult r = run_cli("run " + job + " --nproc 2", dir.path(),
                                    "env -u OPENBLAS_CORETYPE RM_BLAS_ASSUME_CORE=Prescott");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  // Rank 0's banner on the console, rank 1's in its log: each re-executed itself.
  EXPECT_NE(r.out.find("chosen by ringmaster: the library picked Prescott"), std::string::npos)
      << r.out;
  const std::string rank1 = test::slurp(dir.file("run") + "/logs/rank-1.log");
  EXPECT_NE(rank1.find("chosen by ringmaster: the library picked Prescott"), std::string::npos)
      << rank1;
  // The started event records the CPU, the kernels and the measured peak.
  std::ifstream events(dir.file("run") + "/events.jsonl");
  std::string line;
  bool seen = false;
  while (std::getline(events, line)) {
    const auto e = nlohmann::json::parse(line);
    if (e.value("event", "") != "started") continue;
    seen = true;
    ASSERT_TRUE(e.contains("cpu")) << line;
    EXPECT_GE(cpu::blas_core_level(e["cpu"]["blas_core"].get<std::string>())
                  .value_or(cpu::SimdLevel::kSse),
              cpu::SimdLevel::kAvx2)
        << line;
    EXPECT_GT(e["cpu"]["peak_gflops_per_rank"].get<double>(), 1.0) << line;
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace rm

// A disk that fills up during a save, for real: the run directory is on a small tmpfs (mount
// needs root and CAP_SYS_ADMIN; the tests skip, saying so, where it is refused). The save fails
// with exit 1 (a run-time failure, which restarts retry; not 2, bad input), its message names the
// bytes needed and free, the partial checkpoint is gone, the older checkpoints stay, and the
// rerun can start and resume from them.
#include <gtest/gtest.h>

#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// Each checkpoint of this model is ~420 KB (one rank): 1100 KB hold the run's small files and
// two checkpoints (steps 5 and 10), and the third save runs out of space.
constexpr const char* kFsSize = "size=1100k";

class DiskFull : public ::testing::Test {
 protected:
  void SetUp() override {
    mount_point_ = dir_.file("fs");
    fs::create_directories(mount_point_);
    if (::mount("tmpfs", mount_point_.c_str(), "tmpfs", 0, fs_size()) != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno)
                   << "): needs root with CAP_SYS_ADMIN";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mount_point_.c_str(), MNT_DETACH);
  }

  virtual const char* fs_size() const { return kFsSize; }

  std::string job() {
    return dir_.write("job.yaml", R"(name: full
run_dir: )" + mount_point_ + R"(/run
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 30, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 10}
checkpoint: {every: 5, keep: 10}
parallel: {threads_per_rank: 1, timeout_s: 120}
)");
  }
  std::string checkpoints() const { return mount_point_ + "/run/checkpoints"; }
  // Names of step_N.tmp directories left in the checkpoints directory.
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(checkpoints())) {
      const std::string name = e.path().filename();
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) out.push_back(name);
    }
    return out;
  }

  TempDir dir_;
  std::string mount_point_;
  bool mounted_ = false;
};

TEST_F(DiskFull, SaveFailsWithExitOneAndRemovesItsPartialCheckpoint) {
  const std::string j = job();
  const auto r = run_cli("run " + j, dir_.path());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("needs "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" bytes are free on the filesystem of " + mount_point_ + "/run"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
  EXPECT_TRUE(fs::exists(checkpoints() + "/step_00000005/manifest.json"));
  EXPECT_TRUE(fs::exists(checkpoints() + "/step_00000010/manifest.json"));
  // The space came back: the rerun starts, resumes from step 10, and fails the same way.
  const auto again = run_cli("run " + j, dir_.path());
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.out.find("resuming from"), std::string::npos) << again.err << again.out;
  EXPECT_NE(again.out.find("step 10"), std::string::npos) << again.out;
}

TEST_F(DiskFull, TwoRanksFailWithExitOneAndTheRerunResumes) {
  const std::string j = job();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_cli("run " + j + " --nproc 2", dir_.path());
  // Whichever rank runs out of space ends the job at once with the cause, not the other rank
  // timing out in its next collective (parallel.timeout_s is 120 s here, far above the run's
  // time even under ASan on a loaded machine) with the cause lost.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(checkpoints() + "/step_00000010/manifest.json"));
  // A rank killed while it waited for the others may leave step_N.tmp/; the next start
  // removes it (no live run writes it: the run lock) and resumes.
  const auto again = run_cli("run " + j + " --nproc 2", dir_.path());
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.out.find("resuming from"), std::string::npos) << again.err << again.out;
}

// A disk so small that rank 0's metrics.jsonl fills it mid-run (no checkpoint is due): that rank
// ends the job at once naming the cause, as a failed save does. Unwinding instead left rank 1
// in its next all-reduce until parallel.timeout_s (120 s here), and rank 0's message was lost.
class DiskFullOfMetrics : public DiskFull {
 protected:
  const char* fs_size() const override { return "size=24k"; }
};

TEST_F(DiskFullOfMetrics, TwoRanksEndAtOnceNamingTheFullDisk) {
  const std::string j = dir_.write("job.yaml", R"(name: full
run_dir: )" + mount_point_ + R"(/run
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 3000, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1000}
checkpoint: {every: 100000}
parallel: {threads_per_rank: 1, timeout_s: 120}
)");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_cli("run " + j + " --nproc 2", dir_.path());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("metrics.jsonl: write of"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("timed out"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rm

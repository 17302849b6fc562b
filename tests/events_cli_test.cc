// RUN_DIR/events.jsonl through the real binary: one JSON object per event, each with a UTC time
// -- started (ranks, hosts, versions), checkpoint_saved (step, bytes, seconds), resumed (from
// where, and which damaged checkpoints were skipped and why), nan_skipped / nan_rollback,
// stop_signal and stopped, finished. (restart and checkpoint_failed: restart_cli_test,
// save_error_cli_test.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_features.h"
#include "tests/cli_runner.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

std::string job_file(const TempDir& dir, const std::string& extra = "",
                     const std::string& checkpoint = "{every: 10, keep: 3}") {
  return dir.write("job.yaml", R"(name: events
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 30, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 10}
checkpoint: )" + checkpoint + R"(
parallel: {threads_per_rank: 1}
)" + extra);
}

// Every line, each checked to be an object with an "event" and a UTC "time".
std::vector<json> events(const TempDir& dir) {
  std::vector<json> out;
  std::ifstream in(dir.file("run/events.jsonl"));
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    EXPECT_TRUE(j.contains("event")) << line;
    EXPECT_TRUE(std::regex_match(j.value("time", ""),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << line;
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<json> of_kind(const std::vector<json>& all, const std::string& kind) {
  std::vector<json> out;
  for (const json& e : all) {
    if (e["event"] == kind) out.push_back(e);
  }
  return out;
}

uint64_t shard_bytes(const std::string& checkpoint) {
  uint64_t bytes = 0;
  for (const auto& f : fs::directory_iterator(checkpoint)) {
    if (f.path().extension() == ".bin") bytes += fs::file_size(f.path());
  }
  return bytes;
}

TEST(Events, ARunSaysWhatRanWhereAndEachCheckpoint) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir) + " --nproc 2", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> all = events(dir);
  ASSERT_GE(all.size(), 5u);
  const json& started = all.front();
  EXPECT_EQ(started["event"], "started");
  EXPECT_EQ(started["ranks"], 2);
  EXPECT_EQ(started["from_step"], 0);
  EXPECT_FALSE(started["hosts"].get<std::string>().empty());
  EXPECT_NE(started["versions"]["ringmaster"].get<std::string>(), "");
  EXPECT_EQ(started["versions"]["mpi"].get<std::string>().rfind("Open MPI", 0), 0u) << started;
  EXPECT_EQ(started["versions"]["cpu_arch"].get<std::string>(), cpu::build_isa_summary());
  // A fresh start restores nothing; its start-up took some time, and less than the whole run.
  EXPECT_EQ(started["restore_s"], 0) << started;
  EXPECT_GT(started["startup_s"].get<double>(), 0) << started;
  EXPECT_LT(started["startup_s"].get<double>(), 60) << started;
  const std::vector<json> saved = of_kind(all, "checkpoint_saved");
  ASSERT_EQ(saved.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(saved[i]["step"], 10 * (i + 1));
  const std::string last = saved[2]["path"];
  EXPECT_EQ(saved[2]["bytes"].get<uint64_t>(), shard_bytes(last)) << last;
  EXPECT_GT(saved[2]["seconds"].get<double>(), 0);
  EXPECT_EQ(all.back()["event"], "finished");
  EXPECT_EQ(all.back()["step"], 30);
}

TEST(Events, AResumeSaysFromWhereAndWhichDamagedCheckpointItSkipped) {
  TempDir dir;
  // Synchronous saves: step 20's checkpoint is committed before step 21 starts. With async
  // saves, millisecond steps under a loaded CI machine reached the kill at step 25 before the
  // background commit of step 20, and there was no step_00000020 to damage.
  const std::string job = job_file(dir, "", "{every: 10, keep: 3, async: false}");
  const auto killed = run_cli("run " + job + " --nproc 2", dir.path(), "RM_TEST_FAULT=kill:0:25");
  ASSERT_NE(killed.exit_code, 0);
  // Damage the newest checkpoint: the resume must skip it, and say so.
  const std::string shard = dir.file("run/checkpoints/step_00000020/shard_00001.bin");
  ASSERT_TRUE(fs::exists(shard));
  fs::resize_file(shard, 100);
  const auto again = run_cli("run " + job + " --nproc 2", dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::vector<json> all = events(dir);
  const std::vector<json> started = of_kind(all, "started");
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[1]["from_step"], 10);
  // The restart's restore (verifying and reading a checkpoint) is part of its start-up.
  EXPECT_GT(started[1]["restore_s"].get<double>(), 0) << started[1];
  EXPECT_GE(started[1]["startup_s"].get<double>(), started[1]["restore_s"].get<double>())
      << started[1];
  const std::vector<json> resumed = of_kind(all, "resumed");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0]["step"], 10);
  EXPECT_EQ(resumed[0]["from"], dir.file("run/checkpoints/step_00000010"));
  ASSERT_EQ(resumed[0]["skipped"].size(), 1u) << resumed[0];
  const std::string why = resumed[0]["skipped"][0];
  EXPECT_NE(why.find("step_00000020"), std::string::npos) << why;
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
  EXPECT_EQ(of_kind(all, "finished").size(), 1u);
}

TEST(Events, NonFiniteStepsAreRecordedSkippedOrRolledBack) {
  for (const std::string mode : {"skip", "rollback"}) {
    TempDir dir;
    const auto r = run_cli("run " + job_file(dir, "resilience: {on_nan: " + mode + "}\n"),
                           dir.path(), "RM_TEST_FAULT=nan:0:14");
    ASSERT_EQ(r.exit_code, 0) << mode << "\n" << r.err;
    const std::vector<json> nan =
        of_kind(events(dir), "nan_" + std::string(mode == "skip" ? "skipped" : "rollback"));
    ASSERT_EQ(nan.size(), 1u) << mode;
    EXPECT_EQ(nan[0]["step"], 14) << mode;
    EXPECT_EQ(nan[0]["what"], "loss") << mode;
  }
}

}  // namespace
}  // namespace rm

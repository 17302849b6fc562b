// observability.trace and `ringmaster trace` through the real binary on 2 ranks (ZeRO-2, sync
// checkpoints): every rank's window of steps with each layer's forward and backward, each
// reduction, each checkpoint stage; merged into one file with a track per rank whose clocks
// agree at the moments the ranks synchronise; and the errors of the merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

std::string job_file(const TempDir& dir, const std::string& observability) {
  return dir.write("job.yaml", R"(name: traced
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 8, global_batch: 8, micro_batch: 4, eval_every: 0, log_every: 4}
checkpoint: {every: 4, async: false}
parallel: {threads_per_rank: 1, shard: gradients}
observability: )" + observability + "\n");
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// Names of the complete events of rank `pid` on track `tid`.
std::multiset<std::string> names(const json& trace, int pid, int tid) {
  std::multiset<std::string> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid) out.insert(e["name"]);
  }
  return out;
}

// The end (us) of rank pid's `name` span of step `step` on the training track.
double span_end(const json& trace, int pid, const std::string& name, int step) {
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == pid && e["name"] == name && e["args"]["step"] == step) {
      return e["ts"].get<double>() + e["dur"].get<double>();
    }
  }
  ADD_FAILURE() << "no " << name << " of step " << step << " on rank " << pid;
  return NAN;
}

TEST(TraceCli, EachRankRecordsItsWindowAndTheMergeLinesThemUp) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir, "{trace: true, trace_start: 3, trace_steps: 3}") +
                             " --nproc 2",
                         dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank : {0, 1}) {
    ASSERT_TRUE(fs::exists(dir.file("run/trace/rank-0000" + std::to_string(rank) + ".json")));
  }
  const auto merged = run_cli("trace " + dir.file("run"), dir.path());
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_NE(merged.out.find("of 2 ranks"), std::string::npos) << merged.out;
  const json trace = read_json(dir.file("run/trace.json"));
  std::set<int> pids;
  std::map<int, std::string> process_names;
  for (const json& e : trace["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "process_name") {
      process_names[e["pid"]] = e["args"]["name"];
    }
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(process_names[1].rfind("rank 1 (", 0), 0u) << process_names[1];

  for (int rank : {0, 1}) {
    const std::multiset<std::string> training = names(trace, rank, 1);
    for (const char* step : {"step 3", "step 4", "step 5"}) {
      EXPECT_EQ(training.count(step), 1u) << rank << " " << step;
    }
    EXPECT_EQ(training.count("step 2") + training.count("step 6"), 0u) << "outside the window";
    for (const char* span : {"data", "forward", "backward", "gradient sync", "optimizer",
                             "forward embeddings", "forward block 0", "forward block 1",
                             "forward final layernorm", "backward final layernorm",
                             "backward block 1", "backward block 0", "backward embeddings"}) {
      EXPECT_GE(training.count(span), 3u) << "rank " << rank << ": " << span;
    }
    EXPECT_EQ(training.count("checkpoint save"), 1u) << rank;  // step 4's
    // ZeRO-2 reduce-scatters each of the 4 units every step: begun and ended in pairs.
    std::map<std::string, int> open;
    int begun = 0;
    for (const json& e : trace["traceEvents"]) {
      // value(): metadata events have no "cat" (operator[] on a const json's missing key is UB).
      if (e["pid"] != rank || e.value("cat", "") != "comm") continue;
      const std::string key = e["id"].dump() + e["name"].get<std::string>();
      if (e["ph"] == "b") ++open[key], ++begun;
      if (e["ph"] == "e") --open[key];
    }
    for (const auto& [key, n] : open) EXPECT_EQ(n, 0) << key;
    EXPECT_GE(begun, 3 * 4) << rank;
  }
  // Step 4's sync save: every rank's shard stages, and rank 0's commit.
  const std::multiset<std::string> writer0 = names(trace, 0, 3), writer1 = names(trace, 1, 3);
  for (const char* stage : {"shard:write", "shard:fsync", "shard:descriptor"}) {
    EXPECT_EQ(writer0.count(stage), 1u) << stage;
    EXPECT_EQ(writer1.count(stage), 1u) << stage;
  }
  for (const char* stage : {"commit:manifest", "commit:rename", "commit:fsync"}) {
    EXPECT_EQ(writer0.count(stage), 1u) << stage;
    EXPECT_EQ(writer1.count(stage), 0u) << stage;
  }
  // The ranks leave each step's agreement collective together, so on aligned clocks their
  // "gradient sync" phases end within a scheduling delay of each other. The closest of three
  // steps: a misalignment shifts every step alike, while a loaded machine can deschedule a rank
  // ~10 ms at any one of them.
  double closest = 1e300;
  for (int step : {3, 4, 5}) {
    closest = std::min(closest, std::abs(span_end(trace, 0, "gradient sync", step) -
                                         span_end(trace, 1, "gradient sync", step)));
  }
  EXPECT_LT(closest, 25e3);

  // -o writes elsewhere; the default file stays as it was.
  const auto elsewhere = run_cli("trace " + dir.file("run") + " -o " + dir.file("t.json"), dir.path());
  ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  EXPECT_EQ(read_json(dir.file("t.json")), trace);
}

// A traced run that fails while an asynchronous save is still being written (a NaN at step 5,
// on_nan: abort, the step-4 save slowed down): the save ends as the trainer is destroyed, and
// reports to the trace recorder, which outlives it (it was freed first: a use after free that
// ASan names, and a clean exit 1 could become a crash).
TEST(TraceCli, ARunThatFailsDuringAnAsyncSaveEndsWithItsOwnError) {
  TempDir dir;
  const auto r = run_cli("run " + job_file(dir, "{trace: true, trace_start: 2, trace_steps: 6}") +
                             " --set checkpoint.async=true --set resilience.on_nan=abort",
                         dir.path(), "RM_TEST_FAULT=nan:0:5,slowio:0:200000");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("step 5"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("AddressSanitizer"), std::string::npos) << r.err;
}

TEST(TraceCli, WithoutTracingThereIsNothingToMergeAndTheMergeSaysWhy) {
  TempDir dir;
  ASSERT_EQ(run_cli("run " + job_file(dir, "{trace: false}"), dir.path()).exit_code, 0);
  EXPECT_FALSE(fs::exists(dir.file("run/trace")));
  const auto r = run_cli("trace " + dir.file("run"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("run/trace") + ": no trace directory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("observability.trace: true"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run/trace.json")));

  // A file where the directory would be was not written by the run: said so, not "no trace".
  { std::ofstream(dir.file("run/trace")) << "x"; }
  const auto file = run_cli("trace " + dir.file("run"), dir.path());
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_NE(file.err.find(dir.file("run/trace") + ": not a directory"), std::string::npos)
      << file.err;
  EXPECT_FALSE(fs::exists(dir.file("run/trace.json")));
}

// A run of steps 1 and 2 traced, on 2 ranks, in dir/run: its exit code.
int run_traced_on_two_ranks(const TempDir& dir) {
  return run_cli(
             "run " + job_file(dir, "{trace: true, trace_start: 1, trace_steps: 2}") + " --nproc 2",
             dir.path())
      .exit_code;
}

TEST(TraceCli, ADamagedRankFileIsNamedAndNothingIsWritten) {
  TempDir dir;
  ASSERT_EQ(run_traced_on_two_ranks(dir), 0);
  // A run directory whose name is not UTF-8 (Latin-1): merged, the name in otherData with
  // U+FFFD in place of the byte (before: the JSON writer threw, exit 2 and no file).
  const std::string latin1 = dir.file("caf\xe9");
  fs::copy(dir.file("run"), latin1, fs::copy_options::recursive);
  const auto merged = run_cli("trace '" + latin1 + "'", dir.path());
  EXPECT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_NE(test::slurp(latin1 + "/trace.json").find("caf\xef\xbf\xbd"), std::string::npos);
  const std::string damaged = dir.file("run/trace/rank-00001.json");
  fs::resize_file(damaged, fs::file_size(damaged) / 2);
  const auto r = run_cli("trace " + dir.file("run"), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(damaged + ": not a rank trace"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run/trace.json")));
}

// A rank that reached its recorder's limit says how many spans it dropped; the merge says so
// too, naming the rank, and keeps the count (before: said nowhere, the trace read as whole).
TEST(TraceCli, SpansARankDroppedAreNamedAndCounted) {
  TempDir dir;
  ASSERT_EQ(run_traced_on_two_ranks(dir), 0);
  const std::string file = dir.file("run/trace/rank-00001.json");
  const std::string text = test::slurp(file);
  const size_t at = text.find("\"dropped_events\":0");
  ASSERT_NE(at, std::string::npos) << "the recorder writes its count of dropped spans";
  dir.write("run/trace/rank-00001.json",
            text.substr(0, at) + "\"dropped_events\":123" + text.substr(at + 18));
  const auto r = run_cli("trace " + dir.file("run"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1: 123 spans dropped, past the 200000 events a rank records"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("rank 0:"), std::string::npos) << r.err;
  EXPECT_NE(test::slurp(dir.file("run/trace.json")).find("\"dropped_events\":123"),
            std::string::npos);
}

// A window past the run's end (steps 7-11 of 8): the files and the merge say the steps they
// hold, 7 and 8 (before: last_step 11). A rank-1.json beside rank-00001.json is not a second
// rank 1 (before: one of them was merged, whichever the directory listed first, and nothing said).
TEST(TraceCli, TheMergeSaysTheStepsRecordedAndTakesOnlyTheNamesRanksWrite) {
  TempDir dir;
  ASSERT_EQ(run_cli("run " + job_file(dir, "{trace: true, trace_start: 7, trace_steps: 5}") +
                        " --nproc 2",
                    dir.path())
                .exit_code,
            0);
  const json rank1 = read_json(dir.file("run/trace/rank-00001.json"));
  EXPECT_EQ(rank1["otherData"]["first_step"], 7);
  EXPECT_EQ(rank1["otherData"]["last_step"], 8);
  fs::copy_file(dir.file("run/trace/rank-00001.json"), dir.file("run/trace/rank-1.json"));
  const auto r = run_cli("trace " + dir.file("run"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(dir.file("run/trace/rank-1.json") +
                       ": skipped, not a name a rank writes (rank 1's is rank-00001.json)"),
            std::string::npos)
      << r.err;
  const json merged = read_json(dir.file("run/trace.json"));
  EXPECT_EQ(merged["otherData"]["first_step"], 7);
  EXPECT_EQ(merged["otherData"]["last_step"], 8);
}

}  // namespace
}  // namespace rm

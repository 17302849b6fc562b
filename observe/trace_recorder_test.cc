// TraceRecorder's rules, driven by hand as the trainer, ShardedState and a checkpoint writer
// would: the step window, nesting of step > phase > unit, a re-entered phase continuing, async
// communication pairs, checkpoint stages, and the event cap.
#include "observe/trace_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_writer.h"
#include "io/posix_io.h"
#include "testing/temp_dir.h"

namespace rm {
namespace {

using nlohmann::json;

json read_trace(const TraceRecorder& t) { return json::parse(io::read_file(t.path())); }

std::vector<json> of_phase(const json& doc, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

std::map<std::string, int> complete_names(const json& doc) {
  std::map<std::string, int> out;
  for (const json& e : of_phase(doc, "X")) ++out[e["name"].get<std::string>()];
  return out;
}

// One step as the trainer and a two-unit model mark it.
void one_step(TraceRecorder& t, int64_t step) {
  t.begin_step(step);
  t.on_phase(Phase::kData, step);
  t.on_phase(Phase::kForward, step);
  t.unit(0, "embeddings");
  t.unit(1, "block 0");
  t.unit(1, "block 0");  // release: the same unit, the span goes on
  t.on_phase(Phase::kBackward, step);
  t.unit(1, "block 0");
  const uint64_t id = t.comm_begin("all-reduce bucket", 0, 4096);
  t.on_phase(Phase::kBackward, step);  // re-entered at the next unit: the phase goes on
  t.unit(0, "embeddings");
  t.on_phase(Phase::kGradientSync, step);
  t.comm_end(id);
  t.on_phase(Phase::kOptimizer, step);
}

// A run that resumed inside the window (at step 5) and ended inside it (after step 6): the
// file says the steps it holds, not the window's 3-9.
TEST(TraceRecorder, TheFileSaysTheStepsItHoldsWhereTheRunBeganOrEndedInsideTheWindow) {
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, /*first_step=*/3, /*steps=*/7);
  t.align();
  for (int64_t s = 5; s <= 6; ++s) one_step(t, s);
  t.finish();
  const json doc = read_trace(t);
  EXPECT_EQ(doc["otherData"]["first_step"], 5);
  EXPECT_EQ(doc["otherData"]["last_step"], 6);
  EXPECT_EQ(TraceRecorder::file_name(3), "rank-00003.json");
  EXPECT_EQ(TraceRecorder::file_name(123456), "rank-123456.json");
}

TEST(TraceRecorder, RecordsOnlyTheWindowAndNestsStepsPhasesAndUnits) {
  TempDir dir;
  TraceRecorder t(dir.path(), 1, 2, /*first_step=*/3, /*steps=*/2);
  t.align();
  for (int64_t s = 1; s <= 4; ++s) one_step(t, s);
  EXPECT_FALSE(io::exists(t.path()));  // the window's last step is still open
  one_step(t, 5);                      // past the window: written now
  ASSERT_TRUE(io::exists(t.path()));
  const json doc = read_trace(t);
  EXPECT_EQ(doc["otherData"]["rank"], 1);
  EXPECT_EQ(doc["otherData"]["first_step"], 3);
  EXPECT_EQ(doc["otherData"]["last_step"], 4);
  const auto names = complete_names(doc);
  EXPECT_EQ(names.at("step 3"), 1);
  EXPECT_EQ(names.at("step 4"), 1);
  EXPECT_EQ(names.count("step 2"), 0u);
  EXPECT_EQ(names.count("step 5"), 0u);
  EXPECT_EQ(names.at("backward"), 2);  // once a step, though entered twice
  EXPECT_EQ(names.at("forward embeddings"), 2);
  EXPECT_EQ(names.at("forward block 0"), 2);
  EXPECT_EQ(names.at("backward block 0"), 2);
  EXPECT_EQ(names.at("backward embeddings"), 2);
  for (const json& e : of_phase(doc, "X")) EXPECT_EQ(e["pid"], 1);
  // Complete events on one track nest: each starts and ends inside the one it starts in.
  std::vector<json> xs = of_phase(doc, "X");
  std::vector<json> stack;
  std::sort(xs.begin(), xs.end(), [](const json& a, const json& b) {
    return a["ts"] != b["ts"] ? a["ts"] < b["ts"] : a["dur"] > b["dur"];
  });
  for (const json& e : xs) {
    if (e["tid"] != 1) continue;
    const double begin = e["ts"], end = begin + e["dur"].get<double>();
    while (!stack.empty() && stack.back()["ts"].get<double>() + stack.back()["dur"].get<double>() <= begin) {
      stack.pop_back();
    }
    if (!stack.empty()) {
      EXPECT_LE(end, stack.back()["ts"].get<double>() + stack.back()["dur"].get<double>())
          << e << " crosses " << stack.back();
    }
    stack.push_back(e);
  }
  // Each reduction: a begin and an end with the same id, name and category.
  const std::vector<json> b = of_phase(doc, "b"), en = of_phase(doc, "e");
  ASSERT_EQ(b.size(), 2u);
  ASSERT_EQ(en.size(), 2u);
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i]["id"], en[i]["id"]);
    EXPECT_EQ(b[i]["name"], en[i]["name"]);
    EXPECT_EQ(b[i]["name"], "all-reduce bucket 0 (4.0 KiB)");
    EXPECT_LE(b[i]["ts"].get<double>(), en[i]["ts"].get<double>());
  }
}

TEST(TraceRecorder, CheckpointStagesRunFromOneToTheNextAndEndWithTheSave) {
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, 1, 5);
  t.install();
  t.align();
  t.begin_step(1);
  checkpoint_phase("shard:write");  // through the hook, as a save's thread would
  checkpoint_phase("shard:fsync");
  t.save_done();
  t.finish();
  const json doc = read_trace(t);
  std::vector<std::string> stages;
  for (const json& e : of_phase(doc, "X")) {
    if (e["tid"] == 3) stages.push_back(e["name"]);
  }
  EXPECT_EQ(stages, (std::vector<std::string>{"shard:write", "shard:fsync"}));
}

// A save's thread reports stages while the training thread marks steps (ThreadSanitizer runs
// this): every stage the window saw is in the file, whole. Both threads make a bounded number
// of events, far below the cap, however the two are scheduled: on a loaded machine either can
// be starved for seconds, and an unbounded one would fill the cap and drop the other's events.
TEST(TraceRecorder, StagesFromASaveThreadWhileStepsRun) {
  constexpr int kSaves = 200;
  constexpr int64_t kMaxSteps = 5000;  // about 12 events a step: well under kMaxEvents
  static_assert(kMaxSteps * 16 + kSaves * 2 < int64_t{TraceRecorder::kMaxEvents});
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, 1, int64_t{1} << 30);
  t.install();
  t.align();
  std::atomic<bool> saving{true};
  one_step(t, 1);  // recording from here on: every save below lands in the window
  std::thread writer([&] {
    for (int i = 0; i < kSaves; ++i) {
      checkpoint_phase("shard:write");
      checkpoint_phase("shard:fsync");
      t.save_done();
      std::this_thread::yield();
    }
    saving.store(false);
  });
  // Steps go on beside the saves until they end (at least 50, at most kMaxSteps).
  int64_t step = 2;
  for (; step <= kMaxSteps && (step <= 50 || saving.load()); ++step) {
    one_step(t, step);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  writer.join();
  t.finish();
  const json doc = read_trace(t);
  size_t stages = 0;
  for (const json& e : of_phase(doc, "X")) stages += e["tid"] == 3 ? 1 : 0;
  EXPECT_EQ(stages, 2u * kSaves);  // two stages a save, none dropped
  EXPECT_EQ(doc["otherData"].value("dropped_events", size_t{0}), 0u);
  const auto names = complete_names(doc);
  EXPECT_EQ(names.count("step " + std::to_string(step - 1)), 1u);
}

TEST(TraceRecorder, StopsAtTheEventCapAndSaysHowManyItDropped) {
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, 1, 1);
  t.begin_step(1);
  const size_t extra = 1000;
  for (size_t i = 0; i < TraceRecorder::kMaxEvents + extra; ++i) t.unit(static_cast<int>(i % 2), "u");
  t.finish();
  const json doc = read_trace(t);
  // kMaxEvents unit spans, then the step span they nest in (it ends last, past the cap: before,
  // it was dropped and its children kept); the units past the cap never began.
  EXPECT_EQ(doc["traceEvents"].size(), TraceRecorder::kMaxEvents + 1 + 4);  // + 4 metadata
  EXPECT_EQ(doc["traceEvents"].back()["name"], "step 1");
  EXPECT_EQ(doc["otherData"]["dropped_events"].get<size_t>(), extra);
}

// Past the cap a phase re-entered at every unit, and a unit touched again, count once each as
// dropped (each re-entry counted one, several times what would have been written).
TEST(TraceRecorder, PastTheCapAReenteredPhaseOrUnitIsOneDrop) {
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, 1, 1);
  t.begin_step(1);
  for (size_t i = 0; i + 1 < TraceRecorder::kMaxEvents; ++i) t.unit(static_cast<int>(i % 2), "u");
  t.on_phase(Phase::kForward, 1);  // closes the last unit span: the cap is reached
  for (int i = 0; i < 10; ++i) t.on_phase(Phase::kBackward, 1);
  for (int i = 0; i < 10; ++i) t.unit(7, "u7");
  t.finish();
  EXPECT_EQ(read_trace(t)["otherData"]["dropped_events"].get<size_t>(), 2u);  // backward, u7
}

// At the cap, reductions begun before it still end (an async begin without its end is an
// unmatched pair); those issued after it are not recorded at all.
TEST(TraceRecorder, AtTheCapEveryKeptReductionKeepsItsEnd) {
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, 1, 1);
  t.begin_step(1);
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < TraceRecorder::kMaxEvents + 10; ++i)
    ids.push_back(t.comm_begin("r", 0, 4));
  for (uint64_t id : ids) t.comm_end(id);
  t.finish();
  const json doc = read_trace(t);
  std::map<uint64_t, int> begins, ends;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "b") ++begins[e["id"].get<uint64_t>()];
    if (e["ph"] == "e") ++ends[e["id"].get<uint64_t>()];
  }
  EXPECT_EQ(begins.size(), TraceRecorder::kMaxEvents);
  EXPECT_EQ(begins, ends);
}

TEST(TraceRecorder, NothingRecordedWritesNoFile) {
  TempDir dir;
  TraceRecorder t(dir.path(), 0, 1, 100, 5);
  for (int64_t s = 1; s <= 10; ++s) one_step(t, s);
  t.finish();
  EXPECT_FALSE(io::exists(t.path()));
}

}  // namespace
}  // namespace rm

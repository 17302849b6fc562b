// Readers of a live run (checkpoint/checkpoint_pin.h), through the real binary: `ckpt inspect` and
// `eval` of a run that saves every step and keeps one checkpoint read the checkpoint they chose,
// although the run saves several newer ones while they read (RM_TEST_READ_PAUSE_MS holds each
// reader between its choice and its read for as long as the run takes to save a few times). The
// run's retention leaves the pinned one alone and removes it once the readers are done. Before
// the pins, such reads failed now and then ("no such file" reported as damage), and with the
// pause every time.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// The newest committed checkpoint's step, or -1.
long newest_step(const std::string& run) {
  long newest = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 13 && name.rfind("step_", 0) == 0) {
      newest = std::max(newest, std::stol(name.substr(5)));
    }
  }
  return newest;
}

// The path after "checkpoint  " in `ckpt inspect`'s output.
std::string inspected(const std::string& out) {
  const std::string key = "\ncheckpoint  ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return out.substr(from, out.find('\n', from) - from);
}

// A small job in RUN, `steps` long, saving as `checkpoint` says (a YAML flow map).
std::string job_file(const TempDir& dir, const std::string& run, long steps,
                     const std::string& checkpoint) {
  return dir.write("job.yaml",
                   "name: pin\nrun_dir: " + run + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: )" + std::to_string(steps) +
                       R"(, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1000}
checkpoint: )" + checkpoint +
                       R"(
parallel: {threads_per_rank: 1}
)");
}

bool vanishes(const std::string& path) {
  for (int i = 0; i < 3000 && fs::exists(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !fs::exists(path);
}

TEST(ReaderPin, ReadersOfALiveRunKeepingOneCheckpointReadWhatTheyChose) {
  TempDir dir;
  const std::string run = dir.file("run");
  const std::string job = job_file(dir, run, 1000000, "{every: 1, keep: 1}");
  const test::Child trainer = test::spawn_cli("run " + job, dir.path());
  ASSERT_TRUE(test::wait_for_text(run + "/events.jsonl", "checkpoint_saved"));
  const std::string pause = "RM_TEST_READ_PAUSE_MS=1500";

  const auto inspect = run_cli("ckpt inspect " + run, dir.path(), pause);
  EXPECT_EQ(inspect.exit_code, 0) << inspect.out << inspect.err;
  const std::string read = inspected(inspect.out);
  ASSERT_FALSE(read.empty()) << inspect.out;
  // The run saved on meanwhile: with keep: 1, only the pin kept what inspect read.
  EXPECT_GT(newest_step(run), std::stol(fs::path(read).filename().string().substr(5)))
      << read << "\n"
      << inspect.out;
  EXPECT_TRUE(vanishes(read)) << read << " is kept after its reader is done";

  const auto eval = run_cli("eval " + run + " --data data/tinyshakespeare.txt --max-tokens 256",
                            dir.path(), pause);
  EXPECT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_NE(eval.err.find("/checkpoints/step_"), std::string::npos) << eval.err;

  ASSERT_EQ(::kill(trainer.pid, SIGTERM), 0);
  EXPECT_EQ(test::wait_exit(trainer), 75) << test::slurp(trainer.err);
  // Nothing of the pins is left behind: the stop's retention kept exactly one checkpoint.
  const auto verify = run_cli("ckpt list " + run, dir.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find(": 1 checkpoint\n"), std::string::npos) << verify.out;
}

// `run --from` a checkpoint of another run that still saves (every step, keeping one) on 2
// ranks: rank 0 pins the checkpoint before it verifies it and keeps the pin until every rank
// holds its own, here across a pause (RM_TEST_READ_PAUSE_MS) in which the source saves again.
// The resume reads what was verified (before: nothing held it between rank 0's verification and
// the ranks' reads, and the source's retention removed it: "no such directory any more").
TEST(ReaderPin, AResumeFromALiveRunsCheckpointKeepsItUntilEveryRankHoldsIt) {
  TempDir dir;
  const std::string source = dir.file("source");
  const std::string job = job_file(dir, source, 1000000, "{every: 1, keep: 1, async: false}");
  const test::Child trainer =
      test::spawn_cli("run " + job, dir.path(), "source", "RM_TEST_FAULT=slowstep:0:8000");
  // Just after a save: the next is 8 s away (the branch's ranks start and pin it well within
  // that), and it removes this one unless pinned.
  ASSERT_TRUE(test::wait_for_text(source + "/events.jsonl", "checkpoint_saved"));
  const long first = newest_step(source);
  for (int i = 0; i < 1500 && newest_step(source) == first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const long step = newest_step(source);
  ASSERT_GT(step, first);
  char name[32];
  std::snprintf(name, sizeof name, "/checkpoints/step_%08ld", step);
  const std::string from = source + name;
  const auto r = run_cli("run " + job + " --nproc 2 --set run_dir=" + dir.file("branch") +
                             " --set train.steps=" + std::to_string(step + 2) + " --from " + from,
                         dir.path(), "RM_TEST_READ_PAUSE_MS=10000");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resuming from " + from + " (step " + std::to_string(step) + ")"),
            std::string::npos)
      << r.out;
  EXPECT_GT(newest_step(source), step) << "the source saved no newer checkpoint meanwhile";
  EXPECT_TRUE(vanishes(from)) << from << " is kept after its reader is done";
  ASSERT_EQ(::kill(trainer.pid, SIGTERM), 0);
  EXPECT_EQ(test::wait_exit(trainer), 75) << test::slurp(trainer.err);
}

// A 12-step run saving every 4 steps, keeping 1, whose step_8 a reader (`ckpt inspect`) holds for
// `read_ms` from before the run's end: both started, the reader's pin held.
struct RunEndingWhileRead {
  std::string run, read;  // the run directory; step_8, read
  test::Child trainer, reader;
};
RunEndingWhileRead run_ending_while_read(const TempDir& dir, int read_ms) {
  RunEndingWhileRead r;
  r.run = dir.file("run");
  r.read = r.run + "/checkpoints/step_00000008";
  const std::string job = job_file(dir, r.run, 12, "{every: 4, keep: 1}");
  r.trainer = test::spawn_cli("run " + job, dir.path(), "run", "RM_TEST_FAULT=slowstep:0:1000");
  EXPECT_TRUE(test::wait_for_text(r.run + "/events.jsonl", "step_00000008"));
  r.reader = test::spawn_cli("ckpt inspect " + r.read, dir.path(), "inspect",
                             "RM_TEST_READ_PAUSE_MS=" + std::to_string(read_ms));
  EXPECT_TRUE(test::wait_for_text(r.reader.err, "pinned, reading"));
  return r;
}

// A reader holding a checkpoint as the run ends: the last save's retention waits for it (here the
// reader's 4 s) rather than leave it for a retention that never comes (before: the run ended
// with checkpoint.keep + 1 checkpoints, for good).
TEST(ReaderPin, ACheckpointReadAsTheRunEndsIsRemovedOnceRead) {
  TempDir dir;
  const RunEndingWhileRead r = run_ending_while_read(dir, 4000);
  EXPECT_EQ(test::wait_exit(r.trainer), 0) << test::slurp(r.trainer.err);
  EXPECT_EQ(test::wait_exit(r.reader), 0) << test::slurp(r.reader.err);
  EXPECT_NE(test::slurp(r.reader.out).find("step_00000008"), std::string::npos);
  EXPECT_FALSE(fs::exists(r.read)) << "kept after the run ended";
  EXPECT_TRUE(fs::exists(r.run + "/checkpoints/step_00000012"));
}

// ...but a stop signal ends that wait at once: the scheduler's grace time runs meanwhile (found by
// a review: the run waited out its reader). The checkpoint read is then kept, for its reader.
TEST(ReaderPin, AStopEndsTheLastSavesWaitForAReader) {
  TempDir dir;
  const RunEndingWhileRead r = run_ending_while_read(dir, 15000);
  ASSERT_TRUE(test::wait_for_text(r.trainer.out, "step_00000008: waiting up to"))
      << test::slurp(r.trainer.out);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(r.trainer.pid, SIGTERM), 0);
  const int code = test::wait_exit(r.trainer);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8))
      << "the stop waited for the reader";
  EXPECT_TRUE(code == 0 || code == 75) << code << test::slurp(r.trainer.err);
  EXPECT_TRUE(fs::exists(r.run + "/checkpoints/step_00000012"));
  EXPECT_EQ(test::wait_exit(r.reader), 0) << test::slurp(r.reader.err);
}
}  // namespace
}  // namespace rm

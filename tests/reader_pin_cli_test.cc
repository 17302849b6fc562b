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

bool vanishes(const std::string& path) {
  for (int i = 0; i < 3000 && fs::exists(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !fs::exists(path);
}

TEST(ReaderPin, ReadersOfALiveRunKeepingOneCheckpointReadWhatTheyChose) {
  TempDir dir;
  const std::string run = dir.file("run");
  const std::string job = dir.write("job.yaml", R"(name: pin
run_dir: )" + run + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 1000000, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1000}
checkpoint: {every: 1, keep: 1}
parallel: {threads_per_rank: 1}
)");
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

}  // namespace
}  // namespace rm

// Command-line values and the paths the commands that read a run take, through the real binary:
// a bad value is refused while the command line is parsed (exit 2, one message naming the option:
// launcher/cli_checks.h), -o writes through a symbolic link instead of replacing it, options of
// the other mode of `eval` are refused, and `ckpt`, `trace`, `status`, `eval` and `sample` answer
// a young run, a damaged checkpoint or an edited run file with one clear line. Found by an
// adversarial review; each case failed before its fix.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::expect_refused;
using test::run_cli;
using testutil::TempDir;

constexpr int kBadInput = 2;

// A finished 12-step run of a tiny GPT in dir/run (checkpoints at 4, 8 and 12); `extra` adds
// top-level YAML.
std::string train(const TempDir& dir, const std::string& extra = "",
                  const std::string& model_extra = "") {
  const std::string job = dir.write("job.yaml", "name: values\nrun_dir: " + dir.file("run") +
                                                    "\nmodel: {type: gpt, seq_len: 16, layers: 1, "
                                                    "heads: 2, width: 16" +
                                                    model_extra + R"(}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 4, micro_batch: 2, eval_every: 0, log_every: 1}
checkpoint: {every: 4, keep: 3, async: false}
)" + extra);
  const auto r = run_cli("run " + job, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir.file("run");
}

// -o through a symbolic link writes the file it names; the link stays a link. Before, the atomic
// rename replaced the link (as root, `-o /dev/stdout` would have replaced /dev/stdout).
TEST(CliValues, OutputThroughALinkWritesItsTargetAndKeepsTheLink) {
  TempDir dir;
  const std::string run = train(dir);
  dir.write("target.html", "keep");
  fs::create_symlink("target.html", dir.file("link.html"));
  const auto r = run_cli("report " + run + " -o " + dir.file("link.html"), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir.file("link.html")));
  EXPECT_NE(test::slurp(dir.file("target.html")).find("<html"), std::string::npos);
}

// Not a place a file can be renamed into: refused before anything is written, and the same exit
// code from `trace` and `report` (before: 1 and 2 for the same missing directory).
TEST(CliValues, OutputThatIsNoFileOrInNoDirectoryIsRefused) {
  TempDir dir;
  const std::string run = train(dir, "observability: {trace: true}\n");
  for (const char* cmd : {"report ", "trace "}) {
    SCOPED_TRACE(cmd);
    expect_refused(run_cli(cmd + run + " -o /dev/null", dir.path()),
                   "'/dev/null' is not a regular file");
    expect_refused(run_cli(cmd + run + " -o ''", dir.path()), "--output: empty: give a file path");
    expect_refused(run_cli(cmd + run + " -o " + dir.path(), dir.path()), "is a directory");
    expect_refused(run_cli(cmd + run + " -o " + dir.file("none/x"), dir.path()),
                   "no such directory");
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  expect_refused(run_cli("ckpt export " + run + " --format safetensors -o ''", dir.path()),
                 "--output: empty");
}

// Numbers: whole and in range, or refused naming the option (before: -1 wrapped into a uint64
// seed, "abc" got CLI11's "not in range 0 to 1.797...e308", top-p's help said [0 - 1] and 0 failed
// later).
TEST(CliValues, NumbersAreCheckedAndNamed) {
  TempDir dir;
  const std::string run = train(dir);
  const std::string sample = "sample " + run + " --tokens 4 ";
  expect_refused(run_cli(sample + "--seed -1", dir.path()), "--seed: '-1' is not a whole number");
  expect_refused(run_cli(sample + "--seed 18446744073709551616", dir.path()),
                 "is above the largest allowed, 18446744073709551615");
  expect_refused(run_cli(sample + "--top-p 0", dir.path()), "--top-p: '0' is not in (0, 1]");
  expect_refused(run_cli(sample + "--temperature nan", dir.path()), "'nan' is not a number");
  expect_refused(run_cli(sample + "--top-k 1e3", dir.path()), "'1e3' is not a whole number");
  const std::string eval = "eval " + run + " --data data/tinyshakespeare.txt ";
  const auto abc = run_cli(eval + "--max-tokens abc", dir.path());
  expect_refused(abc, "--max-tokens: 'abc' is not a whole number");
  EXPECT_LT(abc.err.size(), 200u) << abc.err;
  EXPECT_EQ(run_cli(sample + "--seed 18446744073709551615", dir.path()).exit_code, 0);
}

// The benchmarks' values: --gib nan passed CLI11's Range and ended in std::bad_array_new_length
// (exit 1); --threads 100000 crashed in the OpenMP runtime; --backend nccl on a build without
// NCCL started the ranks first and added mpirun's banner to the message.
TEST(CliValues, BenchmarkValuesAreCheckedBeforeAnythingRuns) {
  TempDir dir;
  expect_refused(run_cli("bench ckpt --gib nan --dir " + dir.file("b"), dir.path()),
                 "--gib: 'nan' is not a number");
  expect_refused(run_cli("bench ckpt --gib 300 --dir " + dir.file("b"), dir.path()),
                 "give a finite number from 0.001 to 256");
  expect_refused(run_cli("bench cpu --threads 100000", dir.path()),
                 "--threads: '100000' is above the largest allowed");
#ifndef RM_HAVE_NCCL
  const auto nccl = run_cli("bench allreduce --backend nccl", dir.path());
  expect_refused(nccl, "bench allreduce --backend nccl: this build has no NCCL");
  EXPECT_EQ(nccl.err.find("mpirun"), std::string::npos) << nccl.err;
#endif
}

// --from is recorded in events.jsonl and the checkpoints' lines, JSON: a path that is not UTF-8
// is refused as it is read (before: the run ended at its first event, exit 1, naming no flag).
TEST(CliValues, AFromPathThatIsNotUtf8IsRefused) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", "data: {train: data/tinyshakespeare.txt}\n");
  expect_refused(run_cli("run " + job + " --from 'caf\xe9/checkpoints/step_00000008'", dir.path()),
                 "--from: the path is not UTF-8 text: invalid byte 0xE9 at its character 4");
}

// eval's two modes take their own options: one of the other mode is refused, not ignored; an
// empty path is named; --max-tokens below one window is refused (before: it scored one window,
// more than it said).
TEST(CliValues, EvalRefusesTheOtherModesOptionsAndLessThanAWindow) {
  TempDir dir;
  const std::string run = train(dir);
  const std::string choices = dir.write("c.bin", "x");
  const auto excluded = [&](const std::string& args, const std::string& a, const std::string& b) {
    const auto r = run_cli("eval " + run + args, dir.path());
    EXPECT_EQ(r.exit_code, kBadInput) << r.err;
    EXPECT_TRUE(r.err.find(a + " excludes " + b) != std::string::npos ||
                r.err.find(b + " excludes " + a) != std::string::npos)
        << r.err;
  };
  excluded(" --choices " + choices + " --max-tokens 5", "--max-tokens", "--choices");
  excluded(" --choices " + choices + " --tokenizer x", "--tokenizer", "--choices");
  excluded(" --data data/tinyshakespeare.txt --max-examples 3", "--max-examples", "--data");
  expect_refused(run_cli("eval " + run + " --data ''", dir.path()), "--data: empty");
  expect_refused(run_cli("eval '' --data data/tinyshakespeare.txt", dir.path()), "path: empty");
  expect_refused(
      run_cli("eval " + run + " --data data/tinyshakespeare.txt --max-tokens 1", dir.path()),
      "--max-tokens 1 is less than one window, which scores 16 tokens");
  const auto one =
      run_cli("eval " + run + " --data data/tinyshakespeare.txt --max-tokens 40", dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("tokens=32"), std::string::npos) << one.out;
}

// ckpt on a run without a checkpoint yet, on what is neither, and inspect of a run directory.
TEST(CliValues, CkptCommandsTellARunFromACheckpointFromNeither) {
  TempDir dir;
  const std::string job = dir.write("job.yaml", "name: young\nrun_dir: " + dir.file("young") + R"(
model: {type: gpt, seq_len: 16, layers: 1, heads: 2, width: 16}
data: {train: data/tinyshakespeare.txt}
train: {steps: 12, global_batch: 4, micro_batch: 2, eval_every: 0}
checkpoint: {every: 100}
)");
  EXPECT_NE(run_cli("run " + job, dir.path(), "RM_TEST_FAULT=kill:0:5").exit_code, 0);
  const auto young = run_cli("ckpt verify " + dir.file("young"), dir.path());
  EXPECT_EQ(young.exit_code, 0) << young.err;
  EXPECT_NE(young.out.find("no checkpoints yet (nothing to verify)"), std::string::npos)
      << young.out;
  fs::create_directory(dir.file("empty"));
  expect_refused(run_cli("ckpt verify " + dir.file("empty"), dir.path()),
                 "neither a checkpoint (no manifest.json) nor a run directory");
  expect_refused(run_cli("ckpt list " + dir.file("empty"), dir.path()), "not a run directory");

  const std::string run = train(dir);
  expect_refused(run_cli("ckpt list " + run + "/checkpoints/step_00000012", dir.path()),
                 "is a checkpoint, not a run directory");
  const auto inspect = run_cli("ckpt inspect " + run, dir.path());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("its newest checkpoint that verifies"), std::string::npos);
  EXPECT_NE(inspect.out.find("step        12"), std::string::npos) << inspect.out;
}

// A damaged checkpoint given to eval is bad input (exit 2), as a damaged weights.bin is (before:
// 1 for one, 2 for the other).
TEST(CliValues, ADamagedCheckpointIsBadInputToEval) {
  TempDir dir;
  const std::string run = train(dir);
  const std::string shard = run + "/checkpoints/step_00000008/shard_00000.bin";
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(100);
  f.put('\x5a');
  f.close();
  expect_refused(run_cli("eval " + run +
                             "/checkpoints/step_00000008 --data "
                             "data/tinyshakespeare.txt --max-tokens 64",
                         dir.path()),
                 "checksum mismatch");
}

// A model that takes token ids (no tokenizer, a vocabulary other than bytes) samples without
// --prompt from a default id (before: "--prompt: empty", for a prompt nobody gave).
TEST(CliValues, SampleOfAnIdModelStartsWithoutAPrompt) {
  TempDir dir;
  const std::string run = train(dir, "", ", vocab_size: 300");
  const auto r = run_cli("sample " + run + " --tokens 5 --temperature 0", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("^([0-9]+ ){5}\n$"))) << r.out;
}

// Run files edited or written by something else: one message naming the file and the key (before:
// nlohmann's "type must be number, but is string", naming neither), a bounded rank count (before:
// 3 million lines), and status shows an odd event field as written.
TEST(CliValues, EditedRunFilesAreNamedNotThrownAt) {
  TempDir dir;
  const std::string run = train(dir, "observability: {trace: true}\n");
  const std::string rank0 = run + "/trace/rank-00000.json";
  const std::string good = test::slurp(rank0);
  auto edit = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = nlohmann::json::parse(good);
    change(j);
    std::ofstream(rank0) << j.dump();
  };
  edit([](nlohmann::json& j) { j["otherData"]["rank"] = "0"; });
  expect_refused(run_cli("trace " + run, dir.path()),
                 rank0 + ": its otherData.rank is \"0\", not a whole number");
  edit([](nlohmann::json& j) { j["otherData"]["ranks"] = 3000000; });
  const auto many = run_cli("trace " + run, dir.path());
  expect_refused(many, rank0 + ": its otherData.ranks is 3000000");
  EXPECT_LT(many.err.size(), 400u);
  edit([](nlohmann::json& j) { j["traceEvents"].push_back(7); });
  expect_refused(run_cli("trace " + run, dir.path()), "an event of its traceEvents is 7");
  expect_refused(run_cli("trace " + dir.file("missing"), dir.path()),
                 dir.file("missing") + ": no such directory");

  std::ofstream(run + "/events.jsonl", std::ios::app)
      << R"({"event":"restart","time":5,"reason":"x","exit_code":1e30})"
      << "\n";
  const auto status = run_cli("status " + run, dir.path());
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("restarts    1 (last 5: restart, x (exit code 1e+30))"),
            std::string::npos)
      << status.out;
}

}  // namespace
}  // namespace rm

// The files a user hands the commands, through the real binary: outputs that would overwrite
// what the command reads, data that turns bad in one rank's part mid-run, initial weights that
// hold NaN, tokenizer files that are no files or too large, data that `validate` can see here,
// and text given to a model that takes token ids. Found by an adversarial review; each case
// failed before its fix (a test of each says how).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "worker/data/token_shard.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::expect_refused;
using test::run_cli;
using testutil::TempDir;

constexpr int kBadInput = 2;

// A tiny GPT job in dir/run; `extra` overrides (--set ...).
std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", "name: inputs\nrun_dir: " + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 4, global_batch: 8, micro_batch: 4, eval_every: 0, log_every: 1}
checkpoint: {every: 2, keep: 2, async: false}
parallel: {threads_per_rank: 1, timeout_s: 120}
)");
}

// `tokenize -o` its own text replaced the text by the shard; `ckpt export -o RUN/weights.bin`
// replaced the run's weights by the export (the run unreadable after). Both exit 0 before.
TEST(InputFilesCli, AnOutputNeverOverwritesWhatTheCommandReads) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string run = dir.file("run");
  const std::string weights = test::slurp(run + "/weights.bin");
  expect_refused(
      run_cli("ckpt export " + run + " --format llmc -o " + run + "/weights.bin", dir.path()),
      "a file of the run " + run + ", which this command reads");
  expect_refused(run_cli("ckpt export " + run + "/checkpoints/step_00000004 --format llmc -o " +
                             run + "/checkpoints/step_00000004/manifest.json",
                         dir.path()),
                 "a file of the checkpoint");
  expect_refused(run_cli("report " + run + " -o " + run + "/metrics.jsonl", dir.path()),
                 "a file of the run");
  // The locks: written over, a live run's lock no longer keeps a second run out.
  for (const char* lock : {"/.lock", "/.ranks.lock", "/line.json"}) {
    expect_refused(run_cli("report " + run + " -o " + run + lock, dir.path()), "a file of the run");
  }
  EXPECT_EQ(test::slurp(run + "/weights.bin"), weights);
  // A new file beside them is what a user means.
  const auto beside =
      run_cli("ckpt export " + run + " --format llmc -o " + run + "/model.bin", dir.path());
  EXPECT_EQ(beside.exit_code, 0) << beside.err;
  // tokenize: the same file, by another name or through a link.
  const std::string text = dir.write("text.txt", "hello world\n");
  fs::create_symlink(text, dir.file("link.txt"));
  for (const std::string& out : {text, dir.file("./sub/../text.txt"), dir.file("link.txt")}) {
    fs::create_directories(dir.file("sub"));
    expect_refused(
        run_cli("tokenize " + text + " --tokenizer " + dir.path() + " -o " + out, dir.path()),
        "the input file, which this command reads");
  }
  EXPECT_EQ(test::slurp(text), "hello world\n");
}

// 200,000 tokens of the default job's vocabulary (256) with token 300 every 20,000: which
// micro-batch of which rank meets one first depends on the sample order.
void write_sparse_oov_shard(const std::string& path) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 200000; ++i) {
    tokens.push_back(i % 20000 == 19999 ? 300 : static_cast<uint16_t>((i * 7) % 256));
  }
  write_token_shard(path, tokens);
}

// A token id past the vocabulary in the part of the data one of two ranks reads: that rank threw
// and unwound into a collective the other waited in ("rank 1's buffer is not in the same
// allocate() block", exit 1), its own message nowhere, and events.jsonl said nothing of a
// failure (`status` showed the run as alive). Now the rank says it, the job ends with exit 2, and
// a "failed" event names the rank.
TEST(InputFilesCli, ABadTokenInOneRanksPartFailsTheRunByName) {
  TempDir dir;
  write_sparse_oov_shard(dir.file("oov.bin"));
  const auto r =
      run_cli("run " + job_file(dir) + " --nproc 2 --set data.format=tokens --set data.train=" +
                  dir.file("oov.bin") + " --set train.steps=400 --set train.global_batch=16",
              dir.path());
  EXPECT_EQ(r.exit_code, kBadInput) << r.out << r.err;
  EXPECT_NE(r.err.find("token 300 at position"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("allocate() block"), std::string::npos) << r.err;
  const std::string events = test::slurp(dir.file("run/events.jsonl"));
  EXPECT_NE(events.find("\"event\":\"failed\""), std::string::npos) << events;
  EXPECT_NE(events.find("token 300 at position"), std::string::npos) << events;
}

// The same under ZeRO-2, where each micro-batch's gradients are reduce-scattered as the backward
// ends: a bad token found as the next micro-batch is filled, with the last one's reductions
// still in flight, unwound through ShardedState, which aborted the job there -- exit 1 and
// "training stopped with a reduction in flight", the token nowhere (5 of 6 seeds before the
// fix, 0 of 6 after, on 2 cores). Three seeds: other windows, other micro-batches hit first.
TEST(InputFilesCli, ABadTokenFoundWithReductionsInFlightIsStillSaid) {
  TempDir dir;
  write_sparse_oov_shard(dir.file("oov.bin"));
  for (const char* seed : {"1", "3", "5"}) {
    const auto r = run_cli(
        "run " + job_file(dir) +
            " --nproc 2 --fresh --set data.format=tokens --set data.train=" + dir.file("oov.bin") +
            " --set train.steps=400 --set train.global_batch=16 "
            "--set train.micro_batch=1 --set parallel.shard=gradients "
            "--set seed=" +
            seed,
        dir.path());
    EXPECT_EQ(r.exit_code, kBadInput) << "seed " << seed << r.out << r.err;
    EXPECT_NE(r.err.find("token 300 at position"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("reduction in flight"), std::string::npos) << r.err;
  }
}

// Initial weights saved from a diverged run (a NaN in one tensor) trained to NaN, or with
// resilience.on_nan: skip skipped every step and wrote NaN weights, exit 0.
TEST(InputFilesCli, InitialWeightsWithNaNAreRefusedByTensor) {
  TempDir dir;
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const std::string file = dir.file("model.safetensors");
  ASSERT_EQ(
      run_cli("ckpt export " + dir.file("run") + " --format safetensors -o " + file, dir.path())
          .exit_code,
      0);
  std::string bytes = test::slurp(file);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof header);
  const nlohmann::json tensors = nlohmann::json::parse(bytes.substr(8, header));
  const uint64_t begin = tensors.at("transformer.h.0.mlp.c_fc.bias").at("data_offsets")[0];
  const float nan = std::nanf("");
  std::memcpy(&bytes[8 + header + begin + 4 * 10], &nan, sizeof nan);  // its 11th value
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const auto r = run_cli("run " + job + " --set run_dir=" + dir.file("tuned") +
                             " --set resilience.on_nan=skip --set model.init_from=" + file,
                         dir.path());
  expect_refused(r, "'transformer.h.0.mlp.c_fc.bias' holds NaN (its element 10)");
  EXPECT_FALSE(fs::exists(dir.file("tuned/weights.bin")));
  EXPECT_FALSE(fs::exists(dir.file("tuned/metrics.jsonl")));
}

// A tokenizer file that is a directory or a device was "no GPT-2 tokenizer here: expected
// vocab.json and merges.txt" beside both names; a 5 GB vocab.json was read whole (5 GB of memory).
TEST(InputFilesCli, TokenizerFilesThatAreNoFilesOrHugeAreNamed) {
  TempDir dir;
  const std::string text = dir.write("text.txt", "hello\n");
  fs::create_directories(dir.file("tok/vocab.json"));
  dir.write("tok/merges.txt", "#version: 0.2\n");
  expect_refused(
      run_cli("tokenize " + text + " --tokenizer " + dir.file("tok") + " -o " + dir.file("out.bin"),
              dir.path()),
      "tok/vocab.json: not a regular file");
  fs::remove(dir.file("tok/vocab.json"));
  // Sparse; refused by its size before a byte is read (no memory limit around the command: it
  // runs under ASan too, whose reserved shadow memory a data limit would count).
  fs::resize_file(dir.write("tok/vocab.json", "{"), uint64_t{300} << 20);
  const auto huge =
      run_cli("tokenize " + text + " --tokenizer " + dir.file("tok") + " -o " + dir.file("out.bin"),
              dir.path());
  expect_refused(huge, "larger than the 256 MiB a tokenizer file may have");
  expect_refused(run_cli("tokenize " + text + " --tokenizer " + dir.file("none") + " -o " +
                             dir.file("out.bin"),
                         dir.path()),
                 "none: no such directory");
}

// `validate` said "ok" of a job whose data `run` refuses at once (a damaged shard here): the data
// it finds here is now opened as `run` opens it; data it does not find is said to be unchecked.
TEST(InputFilesCli, ValidateChecksTheDataThatIsHere) {
  TempDir dir;
  const std::string job = job_file(dir);
  std::vector<uint16_t> tokens(4096, 7);
  write_token_shard(dir.file("shard.bin"), tokens);
  std::string bytes = test::slurp(dir.file("shard.bin"));
  bytes[0] ^= 1;  // the magic
  std::ofstream(dir.file("shard.bin"), std::ios::binary | std::ios::trunc) << bytes;
  expect_refused(run_cli("validate " + job +
                             " --set data.format=tokens --set data.train=" + dir.file("shard.bin"),
                         dir.path()),
                 "data.train: " + dir.file("shard.bin") + ": bad magic");
  const auto elsewhere =
      run_cli("validate " + job + " --set data.train=/cluster/only/train.txt", dir.path());
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  EXPECT_NE(elsewhere.out.find("data not checked: data.train: /cluster/only/train.txt"),
            std::string::npos)
      << elsewhere.out;
}

// A validation file that data.train's pattern also takes (llm.c's directories hold
// fineweb_train_*.bin beside fineweb_val_*.bin; `DIR/*.bin` takes both) is refused by `validate`
// and `run`, under any spelling of its path, naming the pattern: its loss would be measured on
// training data (before: the run trained on it and reported that loss, exit 0).
TEST(InputFilesCli, AValidationFileThatIsAlsoATrainingFileIsRefused) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string text = test::slurp("data/tinyshakespeare.txt");
  fs::create_directories(dir.file("d"));
  dir.write("d/train_0.txt", text.substr(0, 40000));
  dir.write("d/val_0.txt", text.substr(40000, 10000));
  const std::string val = dir.file("d/val_0.txt");
  const std::string both = " --set data.train=[" + dir.file("d") + "/*.txt] --set data.val=[";
  for (const char* command : {"validate ", "run "}) {
    expect_refused(run_cli(command + job + both + val + "]", dir.path()),
                   "data.val: " + val + " is also a training file (data.train's '" + dir.file("d") +
                       "/*.txt' names it): the validation loss would be "
                       "measured on data the model trains on");
  }
  EXPECT_FALSE(fs::exists(dir.file("run")));
  // Another spelling of the same file.
  expect_refused(run_cli("validate " + job + both + dir.file("d/../d/val_0.txt") + "]", dir.path()),
                 "data.val: " + dir.file("d/../d/val_0.txt") + " is also a training file (data." +
                     "train's '" + dir.file("d") + "/*.txt' names it as " + val + ")");
  // The training files named apart from it: accepted.
  const auto apart = run_cli("run " + job + " --set data.train=[" + dir.file("d") +
                                 "/train_*.txt] --set data.val=[" + val + "]",
                             dir.path());
  EXPECT_EQ(apart.exit_code, 0) << apart.err;
}

// An evaluation that asks for more windows than the validation data holds counts some twice in
// val_loss: said at the start, with the eval_batches that fits (before: silently).
TEST(InputFilesCli, AValidationSetSmallerThanAnEvaluationIsSaid) {
  TempDir dir;
  const std::string val =
      dir.write("val.txt", test::slurp("data/tinyshakespeare.txt").substr(0, 300));
  const std::string job = job_file(dir) + " --set data.val=[" + val +
                          "] --set train.eval_every=2 --set train.eval_batches=";
  const auto r = run_cli("run " + job + "4", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ringmaster: note: the validation data holds 9 windows of 32 tokens, and "
                       "an evaluation takes 16 (train.eval_batches x train.micro_batch = 4 x 4): "
                       "val_loss counts some of them more than once; train.eval_batches 2, or "
                       "more validation data counts each once at most"),
            std::string::npos)
      << r.out;
  const auto fits = run_cli("run " + job + "2 --set run_dir=" + dir.file("fits"), dir.path());
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out.find("note: the validation data"), std::string::npos) << fits.out;
}

// Text given to `eval --data` of a model trained on token ids, without a tokenizer, was scored as
// bytes: nonsense with exit 0 (a damaged shard too, its magic wrong). A model trained on bytes
// takes text, whatever its vocab_size.
TEST(InputFilesCli, EvalRefusesBytesForAModelOfTokenIds) {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 20000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7) % 300));
  write_token_shard(dir.file("train.bin"), tokens);
  const std::string job = job_file(dir);
  ASSERT_EQ(run_cli("run " + job + " --set model.vocab_size=320 --set data.format=tokens " +
                        "--set data.train=" + dir.file("train.bin"),
                    dir.path())
                .exit_code,
            0);
  expect_refused(
      run_cli("eval " + dir.file("run") + " --data data/tinyshakespeare.txt", dir.path()),
      "not an llm.c token shard");
  EXPECT_EQ(
      run_cli("eval " + dir.file("run") + " --data " + dir.file("train.bin"), dir.path()).exit_code,
      0);
  const auto padded = run_cli("run " + job + " --fresh --set model.vocab_size=320", dir.path());
  ASSERT_EQ(padded.exit_code, 0) << padded.err;
  const auto text = run_cli(
      "eval " + dir.file("run") + " --data data/tinyshakespeare.txt --max-tokens 4096", dir.path());
  EXPECT_EQ(text.exit_code, 0) << text.err;
}

// A text data file truncated while the run reads it (mapped): the process died of SIGBUS, exit
// 135, with nothing said. Now one line names the file, exit 2.
TEST(InputFilesCli, DataThatShrinksUnderTheRunIsNamed) {
  TempDir dir;
  const std::string data = dir.file("data.txt");
  fs::copy_file("data/tinyshakespeare.txt", data);
  // Runs the command in the background, truncates the data once a step is logged, and waits.
  const std::string wrapper = dir.write("shrink.sh", R"(#!/bin/bash
"$@" &
child=$!
for _ in $(seq 600); do [ -s )" + dir.file("run/metrics.jsonl") +
                                                         R"( ] && break; sleep 0.05; done
truncate -s 1000 )" + data + R"(
wait $child
)");
  const auto r = run_cli("run " + job_file(dir) + " --set data.train=" + data +
                             " --set train.steps=100000 --set checkpoint.every=0",
                         dir.path(), "", "bash " + wrapper);
  expect_refused(r, data + ": the data file shrank or was replaced while the run read it");
}

}  // namespace
}  // namespace rm

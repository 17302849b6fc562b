// model.init_from through the real binary (worker/initial_weights.h): a run that starts from
// another run's checkpoint, or from the file `ckpt export` wrote of it, on another number of
// ranks in another shard mode, holds exactly those weights; a killed fine-tune resumes from its
// own checkpoint, not from where it began; a damaged or mismatched source stops the run before
// anything is written.
//
// "Exactly those weights": the run to check trains with a learning rate of 1e-30, so every AdamW
// update and weight decay moves no float32 weight by as much as half an ulp, and its final
// weights.bin must be the source's byte for byte -- any tensor misplaced, mistransposed or left
// at its random init shows.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "checkpoint/checkpoint_pin.h"
#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "tests/required_parts.h"

namespace rm {
namespace {

using test::run_cli;
using test::slurp;

// The small GPT of these tests; `steps` and anything else by --set.
std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: finetune
run_dir: )" + dir.file("source") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 30, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 1}
optimizer: {lr: 0.003, warmup_steps: 5}
checkpoint: {every: 10, async: false}
)");
}

// --set arguments for a run into RUN_DIR from SOURCE that changes no weight (see the top).
std::string frozen(const TempDir& dir, const std::string& run_dir, const std::string& source) {
  return " --set run_dir=" + dir.file(run_dir) + " --set model.init_from=" + source +
         " --set optimizer.lr=1e-30 --set optimizer.min_lr=0 --set train.steps=3";
}

// The float payload of a weights.bin (after its 24-byte header: magic, count, checksum).
std::string payload(const std::string& weights_bin) {
  return slurp(weights_bin).substr(24);
}

// Whether two byte strings are equal (EXPECT_EQ would print them whole).
::testing::AssertionResult same(const std::string& a, const std::string& b) {
  if (a == b) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return ::testing::AssertionFailure()
         << a.size() << " and " << b.size() << " bytes, the first difference at byte " << i;
}

class InitFromCli : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = job_file(dir_);
    const auto r = run_cli("run " + job_, dir_.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // `ckpt export` of the source's last checkpoint; its path.
  std::string export_source() {
    const std::string file = dir_.file("source.safetensors");
    const auto r =
        run_cli("ckpt export " + dir_.file("source/checkpoints/step_00000030") + " -o " + file,
                dir_.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return file;
  }
  TempDir dir_;
  std::string job_;
};

// A safetensors or llm.c file has no checksums, and each rank reads it by its path, maybe on
// another host: one replaced while the ranks start would give them different weights, and
// their replicas would train apart for good. Here rank 1 waits 3 s before it opens the file
// (RM_TEST_FAULT=slowinit) and meanwhile another export is renamed onto its name: the ranks see
// that they found different files, and the run stops as bad input (before: exit 0, rank 0's
// replica from one file and rank 1's from the other).
TEST_F(InitFromCli, RanksThatFindDifferentFilesAtOnePathAreRefused) {
  namespace fs = std::filesystem;
  const std::string file = export_source();
  const std::string other = dir_.file("other.safetensors");
  ASSERT_EQ(run_cli("ckpt export " + dir_.file("source/checkpoints/step_00000020") + " -o " + other,
                    dir_.path())
                .exit_code,
            0);
  const test::Child run = test::spawn_cli("run " + job_ + " --nproc 2" + frozen(dir_, "f", file),
                                          dir_.path(), "f", "RM_TEST_FAULT=slowinit:1:3000");
  ASSERT_TRUE(test::wait_for_text(run.err, "[rank 1] RM_TEST_FAULT: slowinit")) << slurp(run.err);
  fs::rename(other, file);
  EXPECT_EQ(test::wait_exit(run), 2) << slurp(run.err);
  EXPECT_NE(slurp(run.err).find("model.init_from: " + file + ": rank 1 found another file ("),
            std::string::npos)
      << slurp(run.err);
  EXPECT_NE(slurp(run.err).find(") than rank 0 ("), std::string::npos) << slurp(run.err);
}

TEST_F(InitFromCli, ARunDirectoryOnTwoRanksGivesItsWeightsExactly) {
  const auto r =
      run_cli("run " + job_ + " --nproc 2" + frozen(dir_, "b", dir_.file("source")), dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ringmaster: weights from " + dir_.file("source") + ": checkpoint " +
                       dir_.file("source/checkpoints/step_00000030") +
                       " (step 30 of 1 rank, shard none), 28 tensors"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(same(payload(dir_.file("b/weights.bin")), payload(dir_.file("source/weights.bin"))));
  const std::string events = slurp(dir_.file("b/events.jsonl"));
  EXPECT_NE(events.find("\"event\":\"initialized\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"step\":30"), std::string::npos) << events;
}

// The source run may still be training while a fine-tune's ranks start, so its newest
// checkpoint can change between one rank opening it and the next. Every rank reads the one rank
// 0 found: here rank 1 waits 6 s before it opens the source (RM_TEST_FAULT=slowinit), and
// meanwhile the source gains a newer committed checkpoint that is broken (step 30's files under
// step 40's name, a shard cut short), which would stop the run if rank 1 looked again. Nor may
// the source's retention remove the one found meanwhile (checkpoint.keep: 1 removes it at the
// next save): rank 0 keeps it pinned until rank 1 has opened it.
TEST_F(InitFromCli, EveryRankReadsTheCheckpointRankZeroFound) {
  namespace fs = std::filesystem;
  const test::Child run =
      test::spawn_cli("run " + job_ + " --nproc 2" + frozen(dir_, "p", dir_.file("source")),
                      dir_.path(), "p", "RM_TEST_FAULT=slowinit:1:6000");
  // Rank 1 got rank 0's choice and sleeps; rank 0, whose own read takes milliseconds, waits.
  const bool rank1_sleeps = test::wait_for_text(run.err, "[rank 1] RM_TEST_FAULT: slowinit");
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string found = dir_.file("source/checkpoints/step_00000030");
  io::Fd claim;
  const bool removable = claim_for_removal(found, &claim);
  claim = io::Fd();
  const std::string newer = dir_.file("source/checkpoints/step_00000040");
  fs::copy(found, newer);
  fs::resize_file(newer + "/shard_00000.bin", 1000);
  ASSERT_EQ(test::wait_exit(run), 0) << slurp(run.err);
  ASSERT_TRUE(rank1_sleeps) << slurp(run.err);
  EXPECT_FALSE(removable) << "retention could remove the checkpoint rank 1 had yet to read";
  EXPECT_TRUE(claim_for_removal(found, &claim)) << "a pin outlived the run";
  claim = io::Fd();  // a pin waits for a claim: the run below would wait for ever
  EXPECT_NE(slurp(run.err).find("[rank 1] RM_TEST_FAULT: slowinit, 6000 ms"), std::string::npos)
      << slurp(run.err);
  EXPECT_TRUE(same(payload(dir_.file("p/weights.bin")), payload(dir_.file("source/weights.bin"))));
  // Started now, a run finds the broken one, as it should.
  const auto r =
      run_cli("run " + job_ + " --nproc 2" + frozen(dir_, "q", dir_.file("source")), dir_.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

TEST_F(InitFromCli, ValidateSaysWhatItWouldRead) {
  const auto r = run_cli("validate " + job_ + frozen(dir_, "v", dir_.file("source")), dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("weights from " + dir_.file("source") + ": checkpoint " +
                       dir_.file("source/checkpoints/step_00000030") + " (step 30"),
            std::string::npos)
      << r.out;
}

TEST_F(InitFromCli, AnExportedFileOnTwoFullyShardedRanksGivesItsWeightsExactly) {
  const std::string file = export_source();
  const auto r =
      run_cli("run " + job_ + " --nproc 2 --set parallel.shard=full" + frozen(dir_, "c", file),
              dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("safetensors, GPT-2 layout, 28 tensors"), std::string::npos) << r.out;
  EXPECT_TRUE(same(payload(dir_.file("c/weights.bin")), payload(dir_.file("source/weights.bin"))));
}

// `ckpt export --format llmc` writes llm.c's model file (what llm.c's trainers read; checked
// against llm.c's own forward pass in the note of 2026-11-30), and init_from reads it back to
// the bit on two ranks; the bf16 file is the same tensors in half the bytes.
TEST_F(InitFromCli, AnLlmcExportOnTwoRanksGivesItsWeightsExactly) {
  const std::string step = dir_.file("source/checkpoints/step_00000030");
  const std::string file = dir_.file("source.bin"), half = dir_.file("source_bf16.bin");
  const auto e = run_cli("ckpt export " + step + " --format llmc -o " + file, dir_.path());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("llm.c model file, version 3 (fp32), 28 tensors, vocabulary 256 padded to "
                       "256"),
            std::string::npos)
      << e.out;
  const auto r = run_cli("run " + job_ + " --nproc 2" + frozen(dir_, "l", file), dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llm.c model file, version 3 (fp32), 28 tensors"), std::string::npos)
      << r.out;
  EXPECT_TRUE(same(payload(dir_.file("l/weights.bin")), payload(dir_.file("source/weights.bin"))));
  ASSERT_EQ(
      run_cli("ckpt export " + step + " --format llmc-bf16 -o " + half, dir_.path()).exit_code, 0);
  const auto header = std::filesystem::file_size(file) - std::filesystem::file_size(half);
  EXPECT_EQ(std::filesystem::file_size(half) - 1024, header) << "bf16: half of fp32's parameters";
  const auto b = run_cli("validate " + job_ + frozen(dir_, "b16", half), dir_.path());
  EXPECT_NE(b.out.find("llm.c model file, version 5 (bf16), 28 tensors"), std::string::npos)
      << b.out << b.err;
}

// llm.c's format holds GPT-2 models: exporting an MLP says so and writes nothing.
TEST(LlmcExportCli, AnMlpIsRefusedAndNothingIsWritten) {
  TempDir dir;
  const std::string job = dir.write("mlp.yaml", R"(name: mlp
run_dir: )" + dir.file("run") + R"(
model: {type: mlp, seq_len: 16, layers: 1, width: 32, mlp_embed: 8, mlp_context: 4}
data: {train: data/tinyshakespeare.txt}
train: {steps: 2, global_batch: 4, micro_batch: 4, eval_every: 0}
)");
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const auto r = run_cli("ckpt export " + dir.file("run/checkpoints/step_00000002") +
                             " --format llmc -o " + dir.file("mlp.bin"),
                         dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("llm.c's files hold GPT-2 models; this checkpoint's model.type is mlp"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("mlp.bin")));
}

TEST_F(InitFromCli, AShorterContextTakesTheFirstRowsOfThePositionEmbedding) {
  const std::string file = export_source();
  const auto r =
      run_cli("run " + job_ + frozen(dir_, "short", file) + " --set model.seq_len=16", dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(wpe: the first 16 of its 32 rows)"), std::string::npos) << r.out;
  // wte [256, 32] comes first, then wpe: the first 16 of its 32 rows, then every block as it was.
  const std::string a = payload(dir_.file("source/weights.bin"));
  const std::string b = payload(dir_.file("short/weights.bin"));
  const size_t wte = 256 * 32 * 4, wpe_short = 16 * 32 * 4, wpe_long = 32 * 32 * 4;
  ASSERT_EQ(b.size() + (wpe_long - wpe_short), a.size());
  EXPECT_TRUE(same(b.substr(0, wte + wpe_short), a.substr(0, wte + wpe_short)));
  EXPECT_TRUE(same(b.substr(wte + wpe_short), a.substr(wte + wpe_long)));
}

TEST_F(InitFromCli, AKilledFineTuneResumesFromItsOwnCheckpoint) {
  const std::string tune = " --set model.init_from=" + dir_.file("source");
  const auto straight =
      run_cli("run " + job_ + tune + " --set run_dir=" + dir_.file("straight"), dir_.path());
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string killed = " --set run_dir=" + dir_.file("killed");
  EXPECT_NE(
      run_cli("run " + job_ + tune + killed, dir_.path(), "RM_TEST_FAULT=kill:0:14").exit_code, 0);
  // The source is not needed to go on (it is read at the first start only): moved away meanwhile,
  // it is not looked for (before: `run` and each rank checked it again and refused, exit 2).
  std::filesystem::rename(dir_.file("source"), dir_.file("source.moved"));
  const auto resumed = run_cli("run " + job_ + tune + killed, dir_.path());
  std::filesystem::rename(dir_.file("source.moved"), dir_.file("source"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("model.init_from not read: the run goes on from its own step 10"),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(resumed.out.find("weights from"), std::string::npos) << resumed.out;
  EXPECT_TRUE(
      same(slurp(dir_.file("straight/weights.bin")), slurp(dir_.file("killed/weights.bin"))));
  EXPECT_TRUE(test::each_step_once(dir_.file("killed/metrics.jsonl"), 30));
  // And the fine-tune did start from the source: its first loss is near the trained model's
  // last, far below a fresh model's first (ln 256 = 5.5 nats on bytes).
  const auto tuned = test::losses_by_step(dir_.file("straight/metrics.jsonl"));
  const auto source = test::losses_by_step(dir_.file("source/metrics.jsonl"));
  EXPECT_LT(tuned.at(1), source.at(1) - 1.0) << tuned.at(1) << " " << source.at(1);
  EXPECT_NEAR(tuned.at(1), source.at(30), 0.3) << tuned.at(1) << " " << source.at(30);
}

TEST_F(InitFromCli, ADamagedSourceStopsTheRunBeforeAnythingIsWritten) {
  const std::string shard = dir_.file("source/checkpoints/step_00000030/shard_00000.bin");
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(1000);
    f.write(&c, 1);
  }
  const auto r =
      run_cli("run " + job_ + " --nproc 2" + frozen(dir_, "d", dir_.file("source")), dir_.path());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(
      r.err.find("model.init_from: " + dir_.file("source") + ": " + shard + ": checksum mismatch"),
      std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("d")));
  // `validate` and `submit` say the same (submit: before sbatch is looked for).
  const auto v = run_cli("validate " + job_ + frozen(dir_, "d", dir_.file("source")), dir_.path());
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.err.find("checksum mismatch"), std::string::npos) << v.err;
  const auto s = run_cli("submit " + job_ + " --dry-run" + frozen(dir_, "d", dir_.file("source")),
                         dir_.path());
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_NE(s.err.find("checksum mismatch"), std::string::npos) << s.err;
}

TEST_F(InitFromCli, AMismatchedOrMisplacedSourceIsRefusedByName) {
  struct Case {
    std::string sets, says;
  };
  const std::string src = dir_.file("source");
  for (const Case& c : {
           Case{" --set model.width=64",
                "tensor 'wte' is [256, 32], the model's wte needs [256, 64] (model.vocab_size x "
                "model.width)"},
           Case{" --set model.layers=3",
                "no tensor 'h.2.ln_1.weight' [32] among its 28: another model? (this job's is gpt: "
                "3 layers, width 32, vocab_size 256, seq_len 32)"},
           Case{" --set model.layers=1", "holds 12 tensors the model has no place for"},
           Case{" --set model.seq_len=64",
                "tensor 'wpe' is [32, 32], the model's wpe needs [64, 32]"},
           Case{" --set model.heads=4",
                "its model has 2 attention heads, this job's model.heads is 4 (the shapes would "
                "match, the model would not)"},
       }) {
    const auto r = run_cli("run " + job_ + frozen(dir_, "m", src) + c.sets, dir_.path());
    EXPECT_EQ(r.exit_code, 2) << c.sets;
    EXPECT_NE(r.err.find("model.init_from: " + src + ": " + c.says), std::string::npos)
        << c.sets << "\n"
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_.file("m"))) << c.sets;
  }
  const auto own = run_cli("run " + job_ + " --fresh --set model.init_from=" + src, dir_.path());
  EXPECT_EQ(own.exit_code, 2);
  EXPECT_NE(own.err.find("inside this job's run_dir"), std::string::npos) << own.err;
  EXPECT_TRUE(std::filesystem::exists(dir_.file("source/weights.bin")));
  const auto bin =
      run_cli("validate " + job_ + frozen(dir_, "m", src + "/weights.bin"), dir_.path());
  EXPECT_EQ(bin.exit_code, 2);
  EXPECT_NE(bin.err.find("a weights.bin holds no tensor names or shapes"), std::string::npos)
      << bin.err;
}

// The decisive check against a file Ringmaster did not write: PyTorch makes a GPT-2 with
// random weights, writes it as GPT-2's published model.safetensors is written (GPT2Model's
// names, mask buffers, 64 positions) and scores a text at 32 tokens a window
// (tests/hf_gpt2_loss.py --random); a run started from that file, its weights unchanged, scores
// the same text the same through `ringmaster eval`.
TEST(InitFromTorch, GptTwoWeightsWrittenByPyTorchScoreTheSame) {
  const char* python = "/usr/bin/python3";  // Debian's, where python3-torch installs
  if (::access(python, X_OK) != 0) RM_SKIP_UNLESS_REQUIRED("torch", python << " not found");
  TempDir dir;
  const std::string file = dir.file("gpt2.safetensors"), torch_out = dir.file("torch.out");
  const int windows = 20, window = 32;
  const int status =
      std::system((std::string(python) + " tests/hf_gpt2_loss.py --random " + file +
                   " 2 2 32 64 7 data/tinyshakespeare.txt " + std::to_string(windows) + " " +
                   std::to_string(window) + " >" + torch_out + " 2>&1")
                      .c_str());
  const std::string torch = slurp(torch_out);
  ASSERT_TRUE(WIFEXITED(status)) << torch;
  if (WEXITSTATUS(status) == 77)
    RM_SKIP_UNLESS_REQUIRED("torch", "PyTorch not installed: " << torch);
  ASSERT_EQ(WEXITSTATUS(status), 0) << torch;
  double torch_loss = 0, rm_loss = 0;
  ASSERT_EQ(std::sscanf(torch.c_str(), "loss=%lf", &torch_loss), 1) << torch;

  const std::string job = job_file(dir);
  const auto r =
      run_cli("run " + job + frozen(dir, "gpt2", file) + " --set train.steps=1", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("safetensors, GPT-2 layout, 28 tensors (wpe: the first 32 of its 64 rows)"),
            std::string::npos)
      << r.out;
  const auto ev = run_cli("eval " + dir.file("gpt2") +
                              " --data data/tinyshakespeare.txt "
                              "--max-tokens " +
                              std::to_string(windows * window),
                          dir.path());
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  ASSERT_EQ(std::sscanf(ev.out.c_str(), "loss=%lf", &rm_loss), 1) << ev.out;
  EXPECT_GT(torch_loss, 6.5) << "the random model should be far from uniform (5.55)";
  EXPECT_NEAR(rm_loss, torch_loss, 1e-4 * torch_loss);
}

}  // namespace
}  // namespace rm

// The checkpoint tools through the real binary: `ckpt list|verify|inspect|export`, damage that
// verify names and resume skips, the safetensors export loaded by a PyTorch GPT-2 written the
// Hugging Face way, and `sample`/`eval` reading checkpoints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/safetensors_writer.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "tests/required_parts.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

constexpr int kWidth = 32, kSeqLen = 32, kLayers = 2;

// One trained run shared by every test (they copy it before changing anything): 12 steps with
// a learning rate high enough that the weights are far from their initialisation, so a wrongly
// laid out export scores visibly worse. Checkpoints at steps 4, 8 and 12.
class CkptCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const std::string job = dir_->write("job.yaml", R"(name: ckpt
run_dir: )" + dir_->file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
optimizer: {lr: 0.01, warmup_steps: 0, schedule: constant}
train: {steps: 12, global_batch: 8, micro_batch: 2, eval_every: 0, log_every: 4}
checkpoint: {every: 4, keep: 3, async: true}
)");
    const auto r = run_cli("run " + job, dir_->path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string job() { return dir_->file("job.yaml"); }
  static std::string run_dir() { return dir_->file("run"); }
  static std::string ckpt(const std::string& run, int step) {
    char name[32];
    std::snprintf(name, sizeof name, "step_%08d", step);
    return run + "/checkpoints/" + name;
  }
  // A private copy of the trained run, to damage.
  std::string copy_run(const std::string& name) {
    const std::string dst = scratch_.file(name);
    fs::copy(run_dir(), dst, fs::copy_options::recursive);
    return dst;
  }

  static TempDir* dir_;
  TempDir scratch_;
};

TempDir* CkptCli::dir_ = nullptr;

TEST_F(CkptCli, ListShowsEveryCheckpointVerified) {
  const auto r = run_cli("ckpt list " + run_dir(), scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 checkpoints"), std::string::npos) << r.out;
  for (const char* step : {"\n4 ", "\n8 ", "\n12 "}) {
    EXPECT_NE(r.out.find(step), std::string::npos) << step << " missing in\n" << r.out;
  }
  size_t oks = 0;
  for (size_t p = r.out.find("  ok\n"); p != std::string::npos; p = r.out.find("  ok\n", p + 1)) ++oks;
  EXPECT_EQ(oks, 3u) << r.out;
  EXPECT_NE(r.out.find("a resume would start from " + ckpt(run_dir(), 12)), std::string::npos)
      << r.out;
}

// Scratch directories are listed for what their names say: a save never committed, a committed
// checkpoint retention is deleting, the copy a re-save moved aside (before: all three
// "incomplete (never committed)").
TEST_F(CkptCli, ListSaysWhatEachScratchDirectoryIs) {
  const std::string run = copy_run("scratch");
  fs::rename(ckpt(run, 4), ckpt(run, 4) + ".del.tmp");
  fs::copy(ckpt(run, 8), ckpt(run, 8) + ".replaced.tmp");
  fs::create_directory(ckpt(run, 16) + ".tmp");
  const auto r = run_cli("ckpt list " + run, scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step_00000004.del.tmp: a checkpoint being deleted by retention"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step_00000008.replaced.tmp: the copy a re-save of this step moved aside"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("step_00000016.tmp: incomplete (never committed)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("1970-"), std::string::npos) << r.out;
}

TEST_F(CkptCli, VerifyPassesGoodCheckpointsAndRunDirectories) {
  for (const std::string& path : {ckpt(run_dir(), 4), ckpt(run_dir(), 12), run_dir()}) {
    const auto r = run_cli("ckpt verify " + path, scratch_.path());
    EXPECT_EQ(r.exit_code, 0) << path << "\n" << r.err << r.out;
  }
  const auto r = run_cli("ckpt verify " + ckpt(run_dir(), 12), scratch_.path());
  EXPECT_NE(r.out.find("ok (step 12"), std::string::npos) << r.out;
}

TEST_F(CkptCli, VerifyOfNothingIsBadInput) {
  const auto r = run_cli("ckpt verify " + scratch_.file("absent"), scratch_.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("absent: no such directory"), std::string::npos) << r.err;
}

// What a review found the tools let through (each was reproduced against the binary before):
// a checkpoint that lost its manifest was "neither a checkpoint nor a run directory" (exit 2,
// a wrong path) rather than damage (exit 1); a copy of step 4 under another step's name, or
// under a never-committed .tmp name, was sampled and exported as if it were that step; and
// `ckpt verify RUN_DIR` said ok over a corrupted weights.bin, the file sample reads first.
TEST_F(CkptCli, VerifyNamesDamageTheOtherToolsWouldMeetAndTheyRefuseMisnamedCopies) {
  const std::string run = copy_run("run");
  const std::string copies = scratch_.file("copies");
  fs::create_directories(copies);
  // A checkpoint without its manifest, by its name or by its shards.
  for (const char* name : {"step_00000004", "shards_only"}) {
    const std::string dir = copies + "/" + name;
    fs::copy(ckpt(run, 4), dir, fs::copy_options::recursive);
    fs::remove(dir + "/manifest.json");
    const auto r = run_cli("ckpt verify " + dir, scratch_.path());
    EXPECT_EQ(r.exit_code, 1) << name << "\n" << r.err;
    EXPECT_NE(r.err.find(dir + "/manifest.json"), std::string::npos) << r.err;
  }
  // Step 4 under step 12's name, and under a name of a save never committed.
  const std::string misnamed = copies + "/step_00000012";
  const std::string tmp = copies + "/step_00000016.tmp";
  fs::copy(ckpt(run, 4), misnamed, fs::copy_options::recursive);
  fs::copy(ckpt(run, 4), tmp, fs::copy_options::recursive);
  for (const std::string& tool : {"sample " + misnamed + " --tokens 3",
                                  "ckpt export " + misnamed + " -o " + scratch_.file("m.st")}) {
    const auto r = run_cli(tool, scratch_.path());
    EXPECT_EQ(r.exit_code, 2) << tool << "\n" << r.err;
    EXPECT_NE(r.err.find("step: 4, but the directory is step_00000012"), std::string::npos)
        << r.err;
  }
  const auto from_tmp = run_cli("sample " + tmp + " --tokens 3", scratch_.path());
  EXPECT_EQ(from_tmp.exit_code, 2) << from_tmp.err;
  EXPECT_NE(from_tmp.err.find(tmp + ": a save never committed (step_00000016.tmp)"),
            std::string::npos)
      << from_tmp.err;
  const auto init = run_cli("validate " + job() + " --set model.init_from=" + tmp, scratch_.path());
  EXPECT_EQ(init.exit_code, 2) << init.err;
  EXPECT_NE(init.err.find("a save never committed"), std::string::npos) << init.err;
  // The run's final weights are verified with its checkpoints.
  const auto good = run_cli("ckpt verify " + run, scratch_.path());
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find(run + "/weights.bin: ok"), std::string::npos) << good.out;
  {
    std::fstream f(run + "/weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  const auto bad = run_cli("ckpt verify " + run, scratch_.path());
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.out.find(run + "/weights.bin: checksum mismatch"), std::string::npos) << bad.out;
}

struct Damage {
  const char* name;
  const char* file;  // in the checkpoint directory
  const char* why;   // what verify must say about it
  void (*apply)(const std::string& path);
};

void flip_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(1000);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(1000);
  f.write(&c, 1);
}
void truncate_file(const std::string& path) { fs::resize_file(path, 1000); }
void remove_file(const std::string& path) { fs::remove(path); }
void garble(const std::string& path) { std::ofstream(path) << "{\"format\": garbage"; }

void PrintTo(const Damage& d, std::ostream* os) { *os << d.name; }

const Damage kDamages[] = {
    {"flipped_byte", "shard_00000.bin", "checksum mismatch", flip_byte},
    {"truncated_shard", "shard_00000.bin", "(truncated)", truncate_file},
    {"missing_shard", "shard_00000.bin", "missing", remove_file},
    {"garbled_manifest", "manifest.json", "invalid JSON", garble},
};

class CkptDamage : public CkptCli, public ::testing::WithParamInterface<Damage> {};

// Each kind of damage to the newest checkpoint: verify fails naming the file and why, list shows
// it, export refuses it, and resuming skips it with the reason and re-trains from the one
// before, to the same weights as the undamaged run.
TEST_P(CkptDamage, VerifyNamesItAndResumeSkipsIt) {
  const Damage& d = GetParam();
  const std::string run = copy_run("run");
  const std::string newest = ckpt(run, 12);
  const std::string bad_file = newest + "/" + d.file;
  d.apply(bad_file);

  auto r = run_cli("ckpt verify " + newest, scratch_.path());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find(bad_file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(d.why), std::string::npos) << r.err;

  r = run_cli("ckpt verify " + run, scratch_.path());
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find(d.why), std::string::npos) << r.out;

  r = run_cli("ckpt list " + run, scratch_.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(d.why), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a resume would start from " + ckpt(run, 8)), std::string::npos) << r.out;

  const std::string exported = scratch_.file("bad.safetensors");
  r = run_cli("ckpt export " + newest + " -o " + exported, scratch_.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(d.file), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(exported));

  // The run finished, so resuming it re-trains steps 9-12 from step 8 and saves step 12 again.
  fs::remove(run + "/weights.bin");
  r = run_cli("run " + job() + " --set run_dir=" + run, scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("skipped " + newest), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(d.why), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resuming from " + ckpt(run, 8)), std::string::npos) << r.out;
  EXPECT_EQ(test::slurp(run + "/weights.bin"), test::slurp(run_dir() + "/weights.bin"));
  EXPECT_EQ(run_cli("ckpt verify " + run, scratch_.path()).exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CkptDamage, ::testing::ValuesIn(kDamages),
                         [](const auto& info) { return std::string(info.param.name); });

// checkpoint.keep newest, plus every keep_every-th step for good.
TEST_F(CkptCli, RetentionKeepsTheNewestAndEveryKth) {
  const std::string run = scratch_.file("retention");
  const auto r = run_cli("run " + job() + " --set run_dir=" + run +
                             " --set 'checkpoint={every: 2, keep: 2, keep_every: 6, async: true}'",
                         scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints")) {
    left.insert(e.path().filename().string());
  }
  EXPECT_EQ(left, (std::set<std::string>{"step_00000006", "step_00000010", "step_00000012"}));
}

TEST_F(CkptCli, InspectShowsTensorsStateAndJob) {
  const auto r = run_cli("ckpt inspect " + ckpt(run_dir(), 8), scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step        8\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"steps_done\":8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h.1.mlp.c_proj.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[32, 128]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq_len: 32"), std::string::npos) << r.out;
}

// The export, in the names, shapes and layouts of GPT2LMHeadModel's state dict.
TEST_F(CkptCli, ExportWritesGpt2StateDict) {
  const std::string out = scratch_.file("model.safetensors");
  const auto r = run_cli("ckpt export " + ckpt(run_dir(), 12) + " -o " + out, scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const SafetensorsHeader h = read_safetensors_header(out);
  std::set<std::string> names;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const SafetensorsEntry& e : h.tensors) {
    names.insert(e.name);
    shapes[e.name] = e.shape;
  }
  std::set<std::string> want = {"transformer.wte.weight", "transformer.wpe.weight",
                                "transformer.ln_f.weight", "transformer.ln_f.bias",
                                "lm_head.weight"};
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    for (const char* n : {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
      want.insert(p + n + ".weight");
      want.insert(p + n + ".bias");
    }
  }
  EXPECT_EQ(names, want);
  const int64_t C = kWidth;
  EXPECT_EQ(shapes["transformer.wte.weight"], (std::vector<int64_t>{256, C}));
  EXPECT_EQ(shapes["transformer.wpe.weight"], (std::vector<int64_t>{kSeqLen, C}));
  EXPECT_EQ(shapes["transformer.h.0.attn.c_attn.weight"], (std::vector<int64_t>{C, 3 * C}));
  EXPECT_EQ(shapes["transformer.h.0.mlp.c_fc.weight"], (std::vector<int64_t>{C, 4 * C}));
  EXPECT_EQ(shapes["transformer.h.0.mlp.c_proj.weight"], (std::vector<int64_t>{4 * C, C}));
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_NE(h.metadata.at("gpt2_config").find("\"n_layer\":2"), std::string::npos);

  // Values: Conv1D weights are the transpose of Ringmaster's [out, in]; the rest are copies.
  CheckpointReader reader(ckpt(run_dir(), 12));
  const std::vector<float> params = reader.read_buffer("params");
  auto ours = [&](const std::string& name) {
    for (const TensorInfo& t : reader.manifest().tensors) {
      if (t.name == name) return params.data() + t.offset;
    }
    ADD_FAILURE() << name << " not in the checkpoint";
    return params.data();
  };
  const auto c_attn = read_safetensors_f32(out, h, "transformer.h.1.attn.c_attn.weight");
  const float* qkv = ours("h.1.attn.c_attn.weight");  // [3C, C]
  for (int64_t o = 0; o < 3 * C; ++o) {
    for (int64_t i = 0; i < C; ++i) ASSERT_EQ(c_attn[i * 3 * C + o], qkv[o * C + i]) << o << "," << i;
  }
  const auto wte = read_safetensors_f32(out, h, "transformer.wte.weight");
  EXPECT_EQ(wte, read_safetensors_f32(out, h, "lm_head.weight"));
  EXPECT_EQ(wte, std::vector<float>(ours("wte"), ours("wte") + 256 * C));
}

// The decisive check of the layout: PyTorch, running GPT-2's forward pass on the exported
// state dict (tests/hf_gpt2_loss.py, strict loading), scores the text as Ringmaster does.
TEST_F(CkptCli, ExportScoresTheSameInPyTorch) {
  // Debian's interpreter, where python3-torch installs (a pyenv python3 may come first on PATH).
  const char* python = "/usr/bin/python3";
  if (::access(python, X_OK) != 0) {
    RM_SKIP_UNLESS_REQUIRED("torch", python << " not found");
  }
  const std::string out = scratch_.file("model.safetensors");
  ASSERT_EQ(run_cli("ckpt export " + run_dir() + " -o " + out, scratch_.path()).exit_code, 0);
  const int windows = 40;
  const std::string torch_out = scratch_.file("torch.out");
  const int status = std::system((std::string(python) + " tests/hf_gpt2_loss.py " + out +
                                  " data/tinyshakespeare.txt " + std::to_string(windows) + " >" +
                                  torch_out + " 2>&1")
                                     .c_str());
  const std::string torch = test::slurp(torch_out);
  ASSERT_TRUE(WIFEXITED(status)) << torch;
  if (WEXITSTATUS(status) == 77) {
    RM_SKIP_UNLESS_REQUIRED("torch", "PyTorch not installed (RM_WITH_TORCH=1 scripts/install-deps.sh "
                                     "installs it): " << torch);
  }
  ASSERT_EQ(WEXITSTATUS(status), 0) << torch;
  double torch_loss = 0, rm_loss = 0;
  ASSERT_EQ(std::sscanf(torch.c_str(), "loss=%lf", &torch_loss), 1) << torch;

  const auto ev = run_cli("eval " + run_dir() + " --data data/tinyshakespeare.txt --max-tokens " +
                              std::to_string(windows * kSeqLen),
                          scratch_.path());
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  ASSERT_EQ(std::sscanf(ev.out.c_str(), "loss=%lf", &rm_loss), 1) << ev.out;
  EXPECT_LT(rm_loss, 4.5) << "the run did not train far enough for this check to mean much";
  EXPECT_NEAR(torch_loss, rm_loss, 1e-4 * rm_loss);
}

// sample and eval take a checkpoint, or a run directory whose run has not finished (no
// weights.bin): then its newest verified checkpoint.
TEST_F(CkptCli, SampleAndEvalReadCheckpoints) {
  auto eval = [&](const std::string& path) {
    const auto r = run_cli("eval " + path + " --data data/tinyshakespeare.txt --max-tokens 640",
                           scratch_.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    double loss = 0;
    EXPECT_EQ(std::sscanf(r.out.c_str(), "loss=%lf", &loss), 1) << r.out;
    return std::make_pair(loss, r.err);
  };
  const auto [at4, err4] = eval(ckpt(run_dir(), 4));
  EXPECT_NE(err4.find("using checkpoint " + ckpt(run_dir(), 4) + " (step 4)"), std::string::npos)
      << err4;
  const auto [at12, err12] = eval(ckpt(run_dir(), 12));
  const auto [final_weights, errw] = eval(run_dir());
  EXPECT_NE(errw.find("weights.bin"), std::string::npos) << errw;
  EXPECT_NE(at4, at12);
  EXPECT_EQ(at12, final_weights);  // the last checkpoint holds the final weights

  const std::string unfinished = copy_run("unfinished");
  fs::remove(unfinished + "/weights.bin");
  fs::remove_all(ckpt(unfinished, 12));
  const auto [newest, errn] = eval(unfinished);
  EXPECT_EQ(newest, eval(ckpt(run_dir(), 8)).first);
  EXPECT_NE(errn.find("(step 8)"), std::string::npos) << errn;

  const auto s = run_cli("sample " + ckpt(run_dir(), 8) + " --prompt ROMEO: --tokens 30",
                         scratch_.path());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("ROMEO:", 0), 0u) << s.out;
  EXPECT_EQ(s.out.size(), std::string("ROMEO:").size() + 30 + 1) << s.out;

  fs::remove_all(unfinished + "/checkpoints");
  const auto none = run_cli("sample " + unfinished, scratch_.path());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("neither weights.bin"), std::string::npos) << none.err;
}

// checkpoint.keep_best: the job's learning rate warms up to far too high a value, so that its
// validation loss is lowest before the end. The run keeps that step's checkpoint beside the
// newest (checkpoint.keep 1), links it as checkpoints/best, and the tools read it there; a
// resumed, extended run knows the best it must beat (no save for an evaluation that does not).
TEST(CkptKeepBest, KeepsAndLinksTheLowestValidationLossAcrossAResume) {
  TempDir dir;
  std::ifstream text("data/tinyshakespeare.txt", std::ios::binary);
  std::string head(4000, '\0');
  text.read(head.data(), static_cast<std::streamsize>(head.size()));
  const std::string data = dir.write("small.txt", head);
  const std::string run = dir.file("run");
  const std::string job = dir.write("job.yaml", "name: kb\nrun_dir: " + run + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: )" + data + R"(, val_fraction: 0.25}
train: {steps: 120, global_batch: 8, micro_batch: 8, eval_every: 10, eval_batches: 4}
optimizer: {lr: 0.2, warmup_steps: 120}
checkpoint: {every: 0, keep: 1, keep_best: true}
)");
  const auto best_step = [&] {
    const std::map<int, double> val = test::val_losses_by_step(run + "/metrics.jsonl");
    int best = 0;
    for (const auto& [step, loss] : val) {
      if (best == 0 || loss < val.at(best)) best = step;
    }
    return best;
  };
  const auto listed = [&] {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(run + "/checkpoints")) {
      out.insert(e.path().filename().string());
    }
    return out;
  };
  ASSERT_EQ(run_cli("run " + job, dir.path()).exit_code, 0);
  const int best = best_step();
  ASSERT_GT(best, 0);
  ASSERT_LT(best, 120) << "the job no longer peaks early: the test checks nothing";
  const std::string link = run + "/checkpoints/best";
  EXPECT_EQ(fs::read_symlink(link).string(), step_dir_name(best));
  EXPECT_EQ(listed(), (std::set<std::string>{"best", step_dir_name(best), step_dir_name(120)}));
  const auto list = run_cli("ckpt list " + run, dir.path());
  EXPECT_NE(list.out.find("the lowest validation loss: " + link + " -> " + step_dir_name(best)),
            std::string::npos)
      << list.out;
  EXPECT_EQ(run_cli("ckpt verify " + run, dir.path()).exit_code, 0);
  const auto status = run_cli("status " + run, dir.path());
  EXPECT_NE(status.out.find("best        " + link + " -> " + step_dir_name(best) + " (val_loss "),
            std::string::npos)
      << status.out;
  {
    // A link moved by hand to a checkpoint not saved as the best: no loss is shown as its
    // (before: the best loss so far in its manifest, "val_loss 0.0000" where there was none).
    const std::string moved = dir.file("moved");
    fs::copy(run, moved, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::remove(moved + "/checkpoints/best");
    fs::create_directory_symlink(step_dir_name(120), moved + "/checkpoints/best");
    const auto other = run_cli("ckpt list " + moved, dir.path());
    EXPECT_NE(
        other.out.find(step_dir_name(120) + " (step 120; its manifest does not mark it the best)"),
        std::string::npos)
        << other.out;
  }
  EXPECT_EQ(run_cli("eval " + link + " --data " + data, dir.path()).exit_code, 0);
  const auto s = run_cli("sample " + link + " --tokens 5", dir.path());
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find("step " + std::to_string(best)), std::string::npos) << s.err;
  // A fine-tune from the link reads where it points as the run starts: the link may move on.
  const auto tune = run_cli(
      "validate " + job + " --set run_dir=" + dir.file("tune") + " --set model.init_from=" + link,
      dir.path());
  EXPECT_NE(tune.out.find("weights from " + link + ": checkpoint " + run + "/checkpoints/" +
                          step_dir_name(best) + " (step " + std::to_string(best) + " of 1 rank"),
            std::string::npos)
      << tune.out << tune.err;
  // Through the link's own directory ("best/."), too: the files are read in the checkpoint the
  // pin holds, never through the link, which retention may repoint between two of them.
  const auto through = run_cli("validate " + job + " --set run_dir=" + dir.file("tune") +
                                   " --set model.init_from=" + link + "/.",
                               dir.path());
  EXPECT_NE(through.out.find("weights from " + link + "/.: checkpoint " + run + "/checkpoints/" +
                             step_dir_name(best) + " (step "),
            std::string::npos)
      << through.out << through.err;

  const auto more = run_cli("run " + job + " --set train.steps=160", dir.path());
  ASSERT_EQ(more.exit_code, 0) << more.err;
  const std::map<int, double> val = test::val_losses_by_step(run + "/metrics.jsonl");
  const int best_now = best_step();
  EXPECT_EQ(fs::read_symlink(link).string(), step_dir_name(best_now));
  const std::string events = test::slurp(run + "/events.jsonl");
  double to_beat = val.at(best);  // what the checkpoint resumed from (step 120) recorded
  int beaten = 0, not_beaten = 0;
  for (int step = 130; step < 160; step += 10) {
    const bool saved =
        events.find("checkpoints/" + step_dir_name(step) + "\"") != std::string::npos;
    EXPECT_EQ(saved, val.at(step) < to_beat)
        << "step " << step << ": saved only if it beat " << to_beat;
    (val.at(step) < to_beat ? beaten : not_beaten) += 1;
    to_beat = std::min(to_beat, val.at(step));
  }
  // Both kinds came, or the loop checked one side only (the extension decays the learning rate
  // from 0.2 over steps 121-160: the loss falls again, not at once).
  EXPECT_GT(beaten, 0);
  EXPECT_GT(not_beaten, 0);
}

}  // namespace
}  // namespace rm

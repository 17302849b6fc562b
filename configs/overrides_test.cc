// --set key.path=value overrides.
#include <gtest/gtest.h>

#include "configs/job_loader.h"
#include "configs/test_util.h"

namespace rm {
namespace {

using testing::kMinimalJob;
using testing::load_errors;
using testing::one_error;

JobConfig load_with(const std::vector<std::string>& overrides,
                    const std::string& text = kMinimalJob) {
  return load_job_from_string(text, "job.yaml", overrides);
}

TEST(Overrides, SetScalarsOfEveryType) {
  const JobConfig cfg =
      load_with({"model.width=512", "optimizer.lr=3e-4", "parallel.overlap=false", "model.type=mlp",
                 "train.steps=5000000000", "seed=7", "name=exp-1"});
  EXPECT_EQ(cfg.model.width, 512);
  EXPECT_EQ(cfg.optimizer.lr, 3e-4);
  EXPECT_FALSE(cfg.parallel.overlap);
  EXPECT_EQ(cfg.model.type, ModelType::kMlp);
  EXPECT_EQ(cfg.train.steps, 5000000000ll);
  EXPECT_EQ(cfg.seed, 7u);
  EXPECT_EQ(cfg.name, "exp-1");
  EXPECT_EQ(cfg.run_dir, "runs/exp-1");
}

TEST(Overrides, WinOverTheFileAndEachOtherInOrder) {
  const std::string text = std::string(kMinimalJob) + "model:\n  width: 128\n";
  EXPECT_EQ(load_with({"model.width=64"}, text).model.width, 64);
  EXPECT_EQ(load_with({"model.width=64", "model.width=32"}, text).model.width, 32);
}

TEST(Overrides, DoNotHideErrorsInTheFile) {
  // The file stays wrong whatever the command line says.
  const std::string text = std::string(kMinimalJob) + "model:\n  width: abc\n";
  EXPECT_EQ(one_error(text, {"model.width=64"}),
            "job.yaml:4:10: model.width: expected an integer, got 'abc'");
}

TEST(Overrides, UnknownKeyWithDidYouMean) {
  EXPECT_EQ(one_error(kMinimalJob, {"model.widht=5"}),
            "--set model.widht: unknown key; did you mean model.width?");
  EXPECT_EQ(one_error(kMinimalJob, {"modle.width=5"}),
            "--set modle.width: unknown key; did you mean model.width?");
  EXPECT_EQ(one_error(kMinimalJob, {"train.lr=0.1"}),
            "--set train.lr: unknown key; did you mean optimizer.lr?");
  EXPECT_EQ(one_error(kMinimalJob, {"model.nope=[1"}), "--set model.nope: unknown key");
}

// A glob that YAML reads as an alias (`*.txt`) or an anchor: the one-item list of its text, not
// "not YAML: the referenced anchor is not defined". A flow list or a quoted value is still YAML.
TEST(Overrides, AFileListGivenAsOneGlobIsTakenAsIs) {
  EXPECT_EQ(load_with({"data.train=*.txt"}).data.train, std::vector<std::string>{"*.txt"});
  EXPECT_EQ(load_with({"data.val=&v*.bin"}).data.val, std::vector<std::string>{"&v*.bin"});
  EXPECT_EQ(load_with({"data.train=[a.txt, b*.txt]"}).data.train,
            (std::vector<std::string>{"a.txt", "b*.txt"}));
  EXPECT_EQ(load_with({"data.train=\"*.txt\""}).data.train, std::vector<std::string>{"*.txt"});
  EXPECT_EQ(load_with({"data.train=data/*.txt"}).data.train,
            std::vector<std::string>{"data/*.txt"});
  // Not for other keys: a number is still read as YAML and refused as before.
  EXPECT_NE(one_error(kMinimalJob, {"model.width=*x"}).find("--set model.width: '*x' is not YAML"),
            std::string::npos);
}

// A key of a hundred thousand bytes is cut in the message, as a file's is.
TEST(Overrides, AnOverlongKeyIsCutInItsMessage) {
  const std::string key = "model." + std::string(100000, 'w');
  const std::string error = one_error(kMinimalJob, {key + "=1"});
  EXPECT_LT(error.size(), 400u) << error.substr(0, 400);
  EXPECT_NE(error.find("unknown key 'model.www"), std::string::npos) << error.substr(0, 400);
}

TEST(Overrides, BadValues) {
  EXPECT_EQ(one_error(kMinimalJob, {"model.width=abc"}),
            "--set model.width: expected an integer, got 'abc'");
  EXPECT_EQ(one_error(kMinimalJob, {"model.width="}),
            "--set model.width: expected an integer, got an empty value");
  EXPECT_EQ(one_error(kMinimalJob, {"model.layers=0"}), "--set model.layers: must be >= 1, got 0");
  // Bounded where a huge value overflowed later (the bucket's float count; start + steps).
  EXPECT_EQ(one_error(kMinimalJob, {"parallel.bucket_mb=1e300"}),
            "--set parallel.bucket_mb: must be in (0, 1048576], got 1e300");
  EXPECT_NE(one_error(kMinimalJob, {"observability.trace_start=9223372036854775807"})
                .find("--set observability.trace_start: must be in [1, "),
            std::string::npos);
  EXPECT_EQ(one_error(kMinimalJob, {"model.type=gtp"}),
            "--set model.type: must be one of gpt|mlp, got 'gtp'; did you mean gpt?");
  EXPECT_EQ(one_error(kMinimalJob, {"data.train=[a.bin"}),
            "--set data.train: '[a.bin' is not YAML: end of sequence flow not found");
  // Read as a job file is: a second document is refused (it was dropped: width 8), and a value
  // yaml-cpp reads as no document (",": it said "an empty value", and cleared data.val) is named.
  EXPECT_EQ(one_error(kMinimalJob, {"model.width=8\n---\n9"}),
            "--set model.width: '8\\n---\\n9' holds more than one YAML document");
  EXPECT_EQ(one_error(kMinimalJob, {"model.width=,"}),
            "--set model.width: ',' is not YAML: unexpected ','");
  EXPECT_EQ(one_error(kMinimalJob, {"data.val=,"}),
            "--set data.val: ',' is not YAML: unexpected ','");
  // A long value is shown cut short: the message of 20000 brackets was 40 KB on one line.
  EXPECT_LT(one_error(kMinimalJob, {"model.width=" + std::string(20000, '[')}).size(), 400u);
  EXPECT_EQ(one_error(kMinimalJob, {"model.width"}), "--set model.width: expected key.path=value");
  EXPECT_EQ(one_error(kMinimalJob, {"model=5"}),
            "--set model: is a section: expected a map of its keys (type, vocab_size, seq_len, "
            "layers, heads, width, mlp_embed, mlp_context, recompute, classifier_chunk_tokens, "
            "dropout, init_from), got '5'");
}

TEST(Overrides, Lists) {
  EXPECT_EQ(load_with({"data.train=[a.bin,b.bin]"}).data.train,
            (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(load_with({"data.train=c.bin"}).data.train, std::vector<std::string>{"c.bin"});
  EXPECT_EQ(load_with({"data.val=[]"}).data.val, std::vector<std::string>{});
  EXPECT_EQ(load_with({"data.val="}).data.val, std::vector<std::string>{});
  EXPECT_EQ(one_error(kMinimalJob, {"data.train=[]"}),
            "--set data.train: no training data: give at least one file or glob");
}

TEST(Overrides, MapEntriesAndWholeMaps) {
  const JobConfig cfg = load_with({"cluster.env.FOO=bar", "cluster.env.NCCL_DEBUG=INFO"});
  EXPECT_EQ(cfg.cluster.env,
            (std::map<std::string, std::string>{{"FOO", "bar"}, {"NCCL_DEBUG", "INFO"}}));
  EXPECT_EQ(load_with({"cluster.env.X=a=b: c"}).cluster.env.at("X"), "a=b: c");
  EXPECT_EQ(load_with({"cluster.env.X=1", "cluster.env={Y: 2}"}).cluster.env,
            (std::map<std::string, std::string>{{"Y", "2"}}));
  EXPECT_EQ(one_error(kMinimalJob, {"cluster.env.9X=1"}),
            "--set cluster.env: '9X' is not a valid name (a letter or '_', then letters, digits, "
            "'_')");
}

// An override of one entry of a map leaves the file's other entries their place: an error in
// the file's cluster.env.A still names the file and line (it read as the override's).
TEST(Overrides, AnEntryOverrideKeepsTheFilesErrorsInTheFile) {
  const std::string text = std::string(kMinimalJob) + "cluster:\n  env: {A: \"x\\ry\"}\n";
  const std::string alone = one_error(text, {});
  EXPECT_EQ(alone.rfind("job.yaml:", 0), 0u) << alone;
  EXPECT_NE(alone.find(": cluster.env.A: holds a newline"), std::string::npos) << alone;
  EXPECT_EQ(one_error(text, {"cluster.env.B=1"}), alone);
}

TEST(Overrides, StringsAreVerbatim) {
  const JobConfig cfg =
      load_with({"cluster.time=24:00:00", "run_dir=runs/gpu #2", "cluster.account="});
  EXPECT_EQ(cfg.cluster.time, "24:00:00");
  EXPECT_EQ(cfg.run_dir, "runs/gpu #2");
  EXPECT_EQ(cfg.cluster.account, "");
  EXPECT_EQ(one_error(kMinimalJob, {"name=my job"}),
            "--set name: must use only letters, digits, '.', '_' and '-' (it names a directory), "
            "got 'my job'");
}

TEST(Overrides, WholeSectionAsFlowMap) {
  const JobConfig cfg = load_with({"model={width: 512, heads: 8}"});
  EXPECT_EQ(cfg.model.width, 512);
  EXPECT_EQ(cfg.model.heads, 8);
  EXPECT_EQ(one_error(kMinimalJob, {"model={widht: 512}"}),
            "--set model.widht: unknown key; did you mean model.width?");
}

TEST(Overrides, CrossFieldErrorsCausedByAnOverride) {
  EXPECT_EQ(one_error(kMinimalJob, {"train.global_batch=30"}),
            "--set train.global_batch: 30 is not a multiple of micro_batch (8) × data-parallel "
            "ranks (1) = 8; the nearest valid values are 24 and 32, or train.micro_batch 6 keeps "
            "global_batch 30 (as a resume on another rank count must)");
  // The offending key is in the file, the override only changed its partner.
  EXPECT_EQ(one_error(std::string(kMinimalJob) + "model:\n  width: 256\n", {"model.heads=7"}),
            "job.yaml:4:10: model.width: 256 is not divisible by model.heads (7)");
}

TEST(Overrides, AllErrorsTogetherWithTheFiles) {
  const std::vector<std::string> errors =
      load_errors("model:\n  width: abc\n", {"model.widht=1", "train.steps=0"});
  const std::vector<std::string> expected = {
      "job.yaml:2:10: model.width: expected an integer, got 'abc'",
      "--set model.widht: unknown key; did you mean model.width?",
      "--set train.steps: must be >= 1, got 0",
      "job.yaml: data.train: no training data: give at least one file or glob",
  };
  EXPECT_EQ(errors, expected);
}

}  // namespace
}  // namespace rm

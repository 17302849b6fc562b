// One test per class of job-file error: each checks the exact FILE:LINE:COL, key path and
// message a user would see.
#include "configs/job_loader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "configs/test_util.h"

namespace rm {
namespace {

using testing::kMinimalJob;
using testing::load_errors;
using testing::one_error;

std::string with_train(const std::string& text) {
  return text + kMinimalJob;
}

TEST(JobLoader, MinimalJobGetsDefaults) {
  const JobConfig cfg = load_job_from_string(kMinimalJob, "job.yaml");
  EXPECT_EQ(cfg.name, "job");
  EXPECT_EQ(cfg.run_dir, "runs/job");
  EXPECT_EQ(cfg.seed, 1337u);
  EXPECT_EQ(cfg.model.width, 256);
  EXPECT_EQ(cfg.data.train, std::vector<std::string>{"data/tinyshakespeare.txt"});
  EXPECT_EQ(cfg.source_path, "");
}

TEST(JobLoader, RunDirFollowsNameUnlessSet) {
  EXPECT_EQ(load_job_from_string(with_train("name: exp1\n"), "j").run_dir, "runs/exp1");
  EXPECT_EQ(load_job_from_string(with_train("name: exp1\nrun_dir: /scratch/x\n"), "j").run_dir,
            "/scratch/x");
  EXPECT_EQ(load_job_from_string(kMinimalJob, "j", {"name=exp2"}).run_dir, "runs/exp2");
}

TEST(JobLoader, MissingFile) {
  try {
    load_job("configs/no-such-job.yaml");
    FAIL() << "expected JobConfigError";
  } catch (const JobConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "configs/no-such-job.yaml: cannot read job file: No such file or directory");
    ASSERT_EQ(e.errors.size(), 1u);
    EXPECT_EQ(e.errors[0].line, 0);
  }
}

TEST(JobLoader, DirectoryIsUnreadable) {
  try {
    load_job(RM_CONFIGS_BUILD_DIR);
    FAIL() << "expected JobConfigError";
  } catch (const JobConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              std::string(RM_CONFIGS_BUILD_DIR) + ": cannot read job file: a directory, not a regular file");
  }
}

TEST(JobLoader, LoadsFileAndSetsSourcePath) {
  const std::string path = std::string(RM_CONFIGS_BUILD_DIR) + "/loader_test_job.yaml";
  std::ofstream(path) << "name: from-file\n" << kMinimalJob << "model:\n  width: abc\n";
  try {
    load_job(path);
    FAIL() << "expected JobConfigError";
  } catch (const JobConfigError& e) {
    EXPECT_STREQ(e.what(), (path + ":5:10: model.width: expected an integer, got 'abc'").c_str());
  }
  std::ofstream(path) << "name: from-file\n" << kMinimalJob;
  const JobConfig cfg = load_job(path);
  EXPECT_EQ(cfg.name, "from-file");
  EXPECT_EQ(cfg.source_path, path);
  std::remove(path.c_str());
}

TEST(JobLoader, YamlSyntaxError) {
  // yaml-cpp stops at the first syntax error, so it is the only one; the positions are its own.
  EXPECT_EQ(one_error("model:\n  width: 1\n bad: 2\n"),
            "job.yaml:3:2: invalid YAML: end of map not found");
  EXPECT_EQ(one_error("model:\n  width: [1, 2\n"),
            "job.yaml:3:1: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(one_error("model:\n  width: 1\n  heads: 2\n\tlayers: 3\n"),
            "job.yaml:4:1: invalid YAML: illegal tab when looking for indentation");
}

TEST(JobLoader, OneDocumentOnly) {
  EXPECT_EQ(one_error(std::string(kMinimalJob) + "---\nname: second\n"),
            "job.yaml:4:1: a job file holds one YAML document; found a second one");
  EXPECT_TRUE(load_errors(std::string("---\n") + kMinimalJob + "---\n").empty());
}

TEST(JobLoader, TopLevelNotAMap) {
  EXPECT_EQ(one_error("- model\n- data\n"),
            "job.yaml:1:1: the top level must be a map of sections (name:, model:, data:, "
            "train:, ...), got a sequence");
  EXPECT_EQ(one_error("just words\n"),
            "job.yaml:1:1: the top level must be a map of sections (name:, model:, data:, "
            "train:, ...), got 'just words'");
}

TEST(JobLoader, EmptyFileNeedsTrainingData) {
  EXPECT_EQ(one_error(""),
            "job.yaml: data.train: no training data: give at least one file or glob");
  EXPECT_EQ(one_error("# only a comment\n"),
            "job.yaml: data.train: no training data: give at least one file or glob");
}

TEST(JobLoader, UnknownKeySuggestsSibling) {
  EXPECT_EQ(one_error(with_train("model:\n  widht: 128\n")),
            "job.yaml:2:3: model.widht: unknown key; did you mean model.width?");
  EXPECT_EQ(one_error(with_train("modle:\n  width: 128\n")),
            "job.yaml:1:1: modle: unknown key; did you mean model?");
  EXPECT_EQ(one_error(with_train("model:\n  depth: 12\n")),
            "job.yaml:2:3: model.depth: unknown key");
}

TEST(JobLoader, MergeKeysAreSaidToBeUnsupported) {
  EXPECT_EQ(one_error(with_train("model:\n  <<: {width: 64}\n")),
            "job.yaml:2:3: model.<<: merge keys (<<: *anchor) are not supported: write the keys "
            "out");
}

TEST(JobLoader, UnknownKeySuggestsOtherSection) {
  EXPECT_EQ(one_error(with_train("train:\n  lr: 0.01\n")),
            "job.yaml:2:3: train.lr: unknown key; did you mean optimizer.lr?");
}

TEST(JobLoader, DottedKeyInFile) {
  EXPECT_EQ(one_error(with_train("model.width: 128\n")),
            "job.yaml:1:1: model.width: unknown key 'model.width'; a job file nests keys as maps "
            "(model: then width: indented); dotted paths are for --set");
}

TEST(JobLoader, WrongTypeInteger) {
  EXPECT_EQ(one_error(with_train("model:\n  width: abc\n")),
            "job.yaml:2:10: model.width: expected an integer, got 'abc'");
  EXPECT_EQ(one_error(with_train("model:\n  width: 1.5\n")),
            "job.yaml:2:10: model.width: expected an integer, got '1.5'");
  EXPECT_EQ(one_error(with_train("model:\n  width: 1e3\n")),
            "job.yaml:2:10: model.width: expected an integer, got '1e3'");
  EXPECT_EQ(one_error(with_train("model:\n  width: \"128\"\n")),
            "job.yaml:2:10: model.width: expected an integer, got the quoted string \"128\"");
  EXPECT_EQ(one_error(with_train("model:\n  width: [1]\n")),
            "job.yaml:2:10: model.width: expected an integer, got a sequence");
  // An empty value has no position of its own: the error points at the key.
  EXPECT_EQ(one_error(with_train("model:\n  width:\n")),
            "job.yaml:2:3: model.width: expected an integer, got an empty value");
  EXPECT_EQ(load_job_from_string(with_train("model:\n  width: +64\n"), "j").model.width, 64);
}

TEST(JobLoader, WrongTypeFloatAndBool) {
  EXPECT_EQ(one_error(with_train("optimizer:\n  lr: fast\n")),
            "job.yaml:2:7: optimizer.lr: expected a number, got 'fast'");
  EXPECT_EQ(one_error(with_train("optimizer:\n  lr: .inf\n")),
            "job.yaml:2:7: optimizer.lr: must be a finite number, got '.inf'");
  EXPECT_EQ(one_error(with_train("optimizer:\n  lr: 0x1p-10\n")),
            "job.yaml:2:7: optimizer.lr: expected a number, got '0x1p-10'");
  EXPECT_EQ(one_error(with_train("parallel:\n  overlap: yes\n")),
            "job.yaml:2:12: parallel.overlap: expected true or false, got 'yes'");
  EXPECT_EQ(one_error(with_train("parallel:\n  overlap: True\n")),
            "job.yaml:2:12: parallel.overlap: expected true or false, got 'True'");
  const JobConfig cfg = load_job_from_string(
      with_train("optimizer:\n  lr: 3\n  eps: 1e-6\nparallel:\n  overlap: false\n"), "j");
  EXPECT_EQ(cfg.optimizer.lr, 3.0);
  EXPECT_EQ(cfg.optimizer.eps, 1e-6);
  EXPECT_FALSE(cfg.parallel.overlap);
}

TEST(JobLoader, WrongTypeStringAndSection) {
  EXPECT_EQ(one_error(with_train("name: [a, b]\n")),
            "job.yaml:1:7: name: expected a string, got a sequence");
  EXPECT_EQ(one_error(with_train("model: gpt\n")),
            "job.yaml:1:8: model: is a section: expected a map of its keys (type, vocab_size, "
            "seq_len, layers, heads, width, mlp_embed, mlp_context, recompute, "
            "classifier_chunk_tokens, dropout, init_from), got 'gpt'");
}

TEST(JobLoader, OutOfRange) {
  EXPECT_EQ(one_error(with_train("model:\n  layers: 0\n")),
            "job.yaml:2:11: model.layers: must be >= 1, got 0");
  EXPECT_EQ(one_error(with_train("optimizer:\n  lr: 0\n")),
            "job.yaml:2:7: optimizer.lr: must be > 0, got 0");
  EXPECT_EQ(one_error(with_train("optimizer:\n  beta2: 1.0\n")),
            "job.yaml:2:10: optimizer.beta2: must be in [0, 1), got 1.0");
  EXPECT_EQ(one_error("data:\n  val_fraction: 0.7\n  train: t.txt\n"),
            "job.yaml:2:17: data.val_fraction: must be in [0, 0.5], got 0.7");
  EXPECT_EQ(one_error(with_train("optimizer:\n  warmup_steps: -5\n")),
            "job.yaml:2:17: optimizer.warmup_steps: must be >= 0, got -5");
}

TEST(JobLoader, IntegerLimitsOfTheFieldType) {
  EXPECT_EQ(one_error(with_train("model:\n  width: 99999999999\n")),
            "job.yaml:2:10: model.width: must be <= 2147483647, got 99999999999");
  EXPECT_EQ(one_error(with_train("seed: -1\n")), "job.yaml:1:7: seed: must be >= 0, got -1");
  EXPECT_EQ(one_error(with_train("seed: 18446744073709551616\n")),
            "job.yaml:1:7: seed: must be <= 18446744073709551615, got 18446744073709551616");
  EXPECT_EQ(load_job_from_string(with_train("seed: 18446744073709551615\n"), "j").seed,
            18446744073709551615ull);
  EXPECT_EQ(load_job_from_string(with_train("train:\n  steps: 10000000000\n"), "j").train.steps,
            10000000000ll);
}

TEST(JobLoader, EnumValueNotAllowed) {
  EXPECT_EQ(one_error(with_train("model:\n  type: gtp\n")),
            "job.yaml:2:9: model.type: must be one of gpt|mlp, got 'gtp'; did you mean gpt?");
  EXPECT_EQ(one_error(with_train("parallel:\n  shard: zero3\n")),
            "job.yaml:2:10: parallel.shard: must be one of none|optimizer|gradients|full, got "
            "'zero3'");
  EXPECT_EQ(one_error(with_train("parallel:\n  precision: BF16\n")),
            "job.yaml:2:14: parallel.precision: must be one of fp32|bf16, got 'BF16'; did you "
            "mean bf16?");
}

TEST(JobLoader, StringChecks) {
  EXPECT_EQ(one_error(with_train("name: my job\n")),
            "job.yaml:1:7: name: must use only letters, digits, '.', '_' and '-' (it names a "
            "directory), got 'my job'");
  EXPECT_EQ(one_error(with_train("name:\n")), "job.yaml:1:1: name: must be non-empty");
  // YAML tags are not acted on: a !!binary name was taken as its base64 text.
  EXPECT_EQ(one_error(with_train("name: !!binary YWJj\n")),
            "job.yaml:1:7: name: a value tagged !!binary: YAML tags are not read; write the "
            "value itself");
  EXPECT_NE(one_error(with_train("model:\n  width: !!float 64\n"))
                .find("got the value tagged !!float '64' (YAML tags are not read"),
            std::string::npos);
  EXPECT_EQ(load_job_from_string(with_train("name: !!str abc\n"), "j").name, "abc");
  EXPECT_EQ(one_error(with_train("name: ..\n")),
            "job.yaml:1:7: name: must not be '..': as runs/.. it would name the directory above "
            "runs/, not a run directory");
  EXPECT_EQ(one_error(with_train("cluster:\n  time: 2 hours\n")),
            "job.yaml:2:9: cluster.time: must be a Slurm time limit (MIN, HH:MM:SS, D-HH:MM:SS or "
            "UNLIMITED, at most 100 years), got '2 hours'");
  for (const char* t : {"90", "1:30", "02:00:00", "1-12", "1-12:00", "1-12:00:00", "unlimited"}) {
    EXPECT_EQ(
        load_job_from_string(
            with_train("cluster:\n  signal_grace_s: 30\n  time: \"" + std::string(t) + "\"\n"), "j")
            .cluster.time,
        t);
  }
  // A node's memory as --mem takes it; 0 is Slurm's "all of each node's memory".
  for (const char* m : {"64G", "512000", "0", "0G"}) {
    EXPECT_EQ(load_job_from_string(
                  with_train("cluster:\n  memory_per_node: \"" + std::string(m) + "\"\n"), "j")
                  .cluster.memory_per_node,
              m);
  }
  EXPECT_NE(one_error(with_train("cluster:\n  memory_per_node: 64GB\n"))
                .find("cluster.memory_per_node: must be a Slurm memory size"),
            std::string::npos);
}

TEST(JobLoader, DuplicateKeys) {
  EXPECT_EQ(one_error(with_train("model:\n  width: 64\n  width: 128\n")),
            "job.yaml:3:3: model.width: duplicate key (first set on line 2)");
  const std::vector<std::string> errors =
      load_errors("model:\n  width: 64\ndata:\n  train: a\nmodel:\n  heads: 2\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "job.yaml:5:1: model: duplicate key (first set on line 1)");
  // A key "" named the whole job again, whose keys then replaced the file's with no duplicate
  // seen (model.width 9 became 8).
  EXPECT_EQ(one_error(with_train("model: {width: 8, heads: 1}\n\"\": {model: {width: 16}}\n")),
            "job.yaml:2:1: expected a key name, got an empty string");
  EXPECT_EQ(one_error(with_train("model: {width: 8, \"\": 1}\n")),
            "job.yaml:1:19: model: expected a key name, got an empty string");
}

TEST(JobLoader, StringLists) {
  EXPECT_EQ(load_job_from_string("data:\n  train: [a.bin, b.bin]\n", "j").data.train,
            (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(load_job_from_string("data:\n  train:\n    - a.bin\n    - b.bin\n", "j").data.train,
            (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(load_job_from_string("data:\n  train: a.bin\n  val:\n", "j").data.val,
            std::vector<std::string>{});
  EXPECT_EQ(one_error("data:\n  train: {a: 1}\n"),
            "job.yaml:2:10: data.train: expected a string or a list of strings, got a map");
  EXPECT_EQ(one_error("data:\n  train:\n    - a.bin\n    - [b.bin]\n"),
            "job.yaml:4:7: data.train[1]: expected a non-empty string, got a sequence");
  EXPECT_EQ(one_error("data:\n  train: [a.bin, \"\"]\n"),
            "job.yaml:2:18: data.train[1]: expected a non-empty string, got an empty string");
}

TEST(JobLoader, StringMaps) {
  const JobConfig cfg = load_job_from_string(
      with_train("cluster:\n  env:\n    NCCL_DEBUG: INFO\n    OMP_NUM_THREADS: 4\n"), "j");
  EXPECT_EQ(cfg.cluster.env,
            (std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"}, {"OMP_NUM_THREADS", "4"}}));
  EXPECT_EQ(one_error(with_train("cluster:\n  env: [A]\n")),
            "job.yaml:2:8: cluster.env: expected a map of NAME: value, got a sequence");
  EXPECT_EQ(one_error(with_train("cluster:\n  env:\n    1X: a\n")),
            "job.yaml:3:5: cluster.env: '1X' is not a valid name (a letter or '_', then letters, "
            "digits, '_')");
  EXPECT_EQ(one_error(with_train("cluster:\n  env:\n    A: [1]\n")),
            "job.yaml:3:8: cluster.env.A: expected a string, got a sequence");
}

TEST(JobLoader, EveryErrorIsReported) {
  const std::vector<std::string> errors = load_errors(
      "name: ok\n"
      "modle:\n"  // 2
      "  width: 1\n"
      "model:\n"              // 4
      "  width: wide\n"       // 5
      "  layers: 0\n"         // 6
      "  type: gtp\n"         // 7
      "optimizer:\n"          // 8
      "  lr: 1e-3\n"          // 9
      "  min_lr: 1e-2\n"      // 10
      "train:\n"              // 11
      "  global_batch: 30\n"  // 12
      "  micro_batch: 8\n"    // 13
      "parallel: fast\n");    // 14
  const std::vector<std::string> expected = {
      "job.yaml:2:1: modle: unknown key; did you mean model?",
      "job.yaml:5:10: model.width: expected an integer, got 'wide'",
      "job.yaml:6:11: model.layers: must be >= 1, got 0",
      "job.yaml:7:9: model.type: must be one of gpt|mlp, got 'gtp'; did you mean gpt?",
      "job.yaml:14:11: parallel: is a section: expected a map of its keys (backend, shard, "
      "bucket_mb, overlap, threads_per_rank, timeout_s, precision, grad_reduce), got 'fast'",
      "job.yaml:12:17: train.global_batch: 30 is not a multiple of micro_batch (8) × "
      "data-parallel ranks (1) = 8; the nearest valid values are 24 and 32, or train.micro_batch "
      "6 keeps global_batch 30 (as a resume on another rank count must)",
      "job.yaml:10:11: optimizer.min_lr: 0.01 is greater than optimizer.lr (0.001)",
      "job.yaml: data.train: no training data: give at least one file or glob",
  };
  EXPECT_EQ(errors, expected);
}

TEST(JobLoader, WhatJoinsAllErrors) {
  try {
    load_job_from_string("model:\n  width: x\n  heads: y\n", "j.yaml");
    FAIL() << "expected JobConfigError";
  } catch (const JobConfigError& e) {
    EXPECT_EQ(e.errors.size(), 3u);
    EXPECT_STREQ(e.what(),
                 "j.yaml:2:10: model.width: expected an integer, got 'x'\n"
                 "j.yaml:3:10: model.heads: expected an integer, got 'y'\n"
                 "j.yaml: data.train: no training data: give at least one file or glob");
  }
}

TEST(JobLoader, DpRanksMustBePositive) {
  EXPECT_THROW(load_job_from_string(kMinimalJob, "j", {}, -1), std::invalid_argument);
}

// `submit` checks the batch arithmetic on cluster.nodes x cluster.tasks_per_node ranks.
TEST(JobLoader, RanksFromTheClusterSection) {
  const std::string job = with_train("cluster:\n  nodes: 2\n  tasks_per_node: 3\n");
  EXPECT_NO_THROW(load_job_from_string(job, "job.yaml", {"train.global_batch=12",
                                                         "train.micro_batch=2"}, kRanksFromCluster));
  const auto errors = load_errors(job, {"train.global_batch=8", "train.micro_batch=2"},
                                  kRanksFromCluster);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("data-parallel ranks (6)"), std::string::npos) << errors[0];
  // A refused node or task count is the one error: no second one about the batch, from the
  // default left in its place (before: "not a multiple of ... ranks (3)" besides).
  for (const char* bad : {"cluster:\n  nodes: 0\n  tasks_per_node: 3\n",
                          "cluster:\n  nodes: 2\n  tasks_per_node: 0\n"}) {
    const auto one = load_errors(with_train(bad), {}, kRanksFromCluster);
    ASSERT_EQ(one.size(), 1u) << bad << one.back();
    EXPECT_NE(one[0].find("must be >= 1"), std::string::npos) << one[0];
  }
}

// What submit writes into the batch script must be a Slurm value, never shell.
TEST(JobLoader, ClusterValuesMustBeSlurmValues) {
  EXPECT_EQ(one_error(with_train("cluster:\n  partition: gpu debug\n")),
            "job.yaml:2:14: cluster.partition: must be a Slurm name (letters, digits, '.', '_', "
            "'-'; several separated by ','), got 'gpu debug'");
  EXPECT_TRUE(load_errors(with_train("cluster:\n  partition: debug,urgent\n  account: "
                                     "proj-1.a\n  qos: high_prio\n")).empty());
  for (const char* bad : {"a;touch x", "$(id)", "`id`", "'q'", "\"q\""}) {
    EXPECT_EQ(load_errors(with_train(std::string("cluster:\n  qos: '") +
                                     (std::string(bad) == "'q'" ? "''q''" : bad) + "'\n")).size(),
              1u) << bad;
  }
  EXPECT_EQ(one_error(with_train("cluster:\n  sbatch_extra: [--nodes=4]\n")),
            "job.yaml:2:17: cluster.sbatch_extra: '--nodes=4': --nodes is set by submit; use "
            "cluster.nodes");
  EXPECT_EQ(one_error(with_train("cluster:\n  sbatch_extra: [-N4]\n")),
            "job.yaml:2:17: cluster.sbatch_extra: '-N4' must be one long option starting with "
            "'--' (e.g. --constraint=a100)");
  EXPECT_EQ(one_error(with_train("cluster:\n  sbatch_extra: [\"--comment=a\\nrm -rf x\"]\n")),
            "job.yaml:2:17: cluster.sbatch_extra: an item holds a newline or another control "
            "character");
  EXPECT_EQ(one_error(with_train("cluster:\n  env:\n    A: \"x\\ny\"\n")),
            "job.yaml:3:5: cluster.env.A: holds a newline or another control character");
  EXPECT_TRUE(load_errors(with_train("cluster:\n  sbatch_extra: [--exclusive, "
                                     "--constraint=a100]\n  env: {A: \"$(x) 'y'\"}\n")).empty());
  // One option per item (sbatch reads each word of an #SBATCH line as an option), and none that
  // breaks submit.
  EXPECT_EQ(one_error(with_train("cluster:\n  sbatch_extra: [\"--hold --nodes=2\"]\n")),
            "job.yaml:2:17: cluster.sbatch_extra: '--hold --nodes=2' holds more than one option: "
            "sbatch reads each word of it; give one option per item (a value with spaces in "
            "double quotes)");
  // Abbreviations (getopt_long's unique prefixes) are the options they stand for.
  EXPECT_NE(
      one_error(with_train("cluster:\n  sbatch_extra: [--arr=0-3]\n")).find("not with submit"),
      std::string::npos);
  EXPECT_NE(one_error(with_train("cluster:\n  sbatch_extra: [--nod=2]\n"))
                .find("--nodes is set by submit"),
            std::string::npos);
  EXPECT_EQ(one_error(with_train("cluster:\n  sbatch_extra: [--wait]\n")),
            "job.yaml:2:17: cluster.sbatch_extra: '--wait': not with submit: submit would hold "
            "the run's lock until the job ends, and the job wait for it");
  for (const char* refused : {"--test-only", "--array=0-2", "--wrap=x", "--parsable"}) {
    EXPECT_EQ(load_errors(with_train("cluster:\n  sbatch_extra: [" + std::string(refused) + "]\n"))
                  .size(),
              1u)
        << refused;
  }
  EXPECT_TRUE(load_errors(with_train("cluster:\n  sbatch_extra: ['--comment=\"a b\"', --hold, "
                                     "'--gres gpu:2', --gpus=2]\n"))
                  .empty());
}

TEST(ConfigErrorFormat, Forms) {
  EXPECT_EQ((ConfigError{"a.yaml", 3, 7, "model.width", "bad"}).str(),
            "a.yaml:3:7: model.width: bad");
  EXPECT_EQ((ConfigError{"a.yaml", 0, 0, "model.width", "bad"}).str(), "a.yaml: model.width: bad");
  EXPECT_EQ((ConfigError{"a.yaml", 0, 0, "", "bad"}).str(), "a.yaml: bad");
  EXPECT_EQ((ConfigError{kOverrideSource, 0, 0, "model.width", "bad"}).str(),
            "--set model.width: bad");
  EXPECT_EQ((ConfigError{"", 0, 0, "model.width", "bad"}).str(), "model.width: bad");
}

}  // namespace
}  // namespace rm

// The cross-field rules, and where their errors point.
#include <gtest/gtest.h>

#include <stdexcept>

#include "configs/job_loader.h"
#include "configs/slurm_time.h"
#include "configs/test_util.h"

namespace rm {
namespace {

using testing::kMinimalJob;
using testing::load_errors;
using testing::one_error;

std::string with_train(const std::string& text) {
  return text + kMinimalJob;
}

TEST(BatchArithmetic, MessageNamesEveryNumber) {
  JobConfig cfg;
  cfg.train.global_batch = 64;
  cfg.train.micro_batch = 6;
  cfg.source_path = "x.yaml";
  const std::vector<ConfigError> errors = check_batch_arithmetic(cfg, 2);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].str(),
            "x.yaml: train.global_batch: 64 is not a multiple of micro_batch (6) × data-parallel "
            "ranks (2) = 12; the nearest valid values are 60 and 72, or train.micro_batch 4 keeps "
            "global_batch 64 (as a resume on another rank count must)");
  cfg.train.global_batch = 8;
  EXPECT_EQ(
      check_batch_arithmetic(cfg, 2)[0].message,
      "8 is not a multiple of micro_batch (6) × data-parallel ranks (2) = 12; the nearest "
      "valid value is 12, or train.micro_batch 4 keeps global_batch 8 (as a resume on another "
      "rank count must)");
  // No micro_batch keeps it where the ranks do not divide it.
  cfg.train.global_batch = 9;
  EXPECT_EQ(check_batch_arithmetic(cfg, 2)[0].message,
            "9 is not a multiple of micro_batch (6) × data-parallel ranks (2) = 12; the nearest "
            "valid value is 12");
}

TEST(BatchArithmetic, WholeAccumulationCountsPass) {
  JobConfig cfg;
  cfg.train.global_batch = 512;
  cfg.train.micro_batch = 4;
  EXPECT_TRUE(check_batch_arithmetic(cfg, 64).empty());    // 2 accumulation steps
  EXPECT_TRUE(check_batch_arithmetic(cfg, 128).empty());   // 1
  EXPECT_FALSE(check_batch_arithmetic(cfg, 256).empty());  // would need half a step
  EXPECT_FALSE(check_batch_arithmetic(cfg, 3).empty());
  EXPECT_THROW(check_batch_arithmetic(cfg, 0), std::invalid_argument);
}

TEST(BatchArithmetic, PointsAtGlobalBatchInTheFile) {
  EXPECT_EQ(one_error(with_train("train:\n  micro_batch: 8\n  global_batch: 40\n"), {}, 2),
            "job.yaml:3:17: train.global_batch: 40 is not a multiple of micro_batch (8) × "
            "data-parallel ranks (2) = 16; the nearest valid values are 32 and 48, or "
            "train.micro_batch 5 keeps global_batch 40 (as a resume on another rank count must)");
  // global_batch not in the file: point at the train section.
  EXPECT_EQ(one_error(with_train("train:\n  micro_batch: 5\n")),
            "job.yaml:1:1: train.global_batch: 32 is not a multiple of micro_batch (5) × "
            "data-parallel ranks (1) = 5; the nearest valid values are 30 and 35, or "
            "train.micro_batch 4 keeps global_batch 32 (as a resume on another rank count must)");
  // No train section at all: no position.
  EXPECT_EQ(one_error(kMinimalJob, {}, 3),
            "job.yaml: train.global_batch: 32 is not a multiple of micro_batch (8) × "
            "data-parallel ranks (3) = 24; the nearest valid values are 24 and 48");
}

TEST(CrossField, WidthDivisibleByHeads) {
  EXPECT_EQ(one_error(with_train("model:\n  heads: 6\n  width: 256\n")),
            "job.yaml:3:10: model.width: 256 is not divisible by model.heads (6)");
  // mlp has no heads.
  EXPECT_TRUE(load_errors(with_train("model:\n  type: mlp\n  heads: 6\n  width: 256\n")).empty());
}

TEST(CrossField, SkippedWhenAnInputWasRejected) {
  // heads: 3 against the default width would be an error, but width was written (badly): the
  // user should hear only about what they wrote.
  EXPECT_EQ(one_error(with_train("model:\n  width: abc\n  heads: 3\n")),
            "job.yaml:2:10: model.width: expected an integer, got 'abc'");
}

TEST(CrossField, EvalBatches) {
  EXPECT_EQ(one_error(with_train("train:\n  eval_every: 100\n  eval_batches: 0\n")),
            "job.yaml:3:17: train.eval_batches: must be >= 1 when train.eval_every > 0 (it is "
            "100), got 0");
  EXPECT_TRUE(load_errors(with_train("train:\n  eval_every: 0\n  eval_batches: 0\n")).empty());
}

TEST(CrossField, MinLrAtMostLr) {
  EXPECT_EQ(one_error(with_train("optimizer:\n  lr: 1e-4\n  min_lr: 2e-4\n")),
            "job.yaml:3:11: optimizer.min_lr: 0.0002 is greater than optimizer.lr (0.0001)");
  EXPECT_TRUE(load_errors(with_train("optimizer:\n  lr: 1e-4\n  min_lr: 1e-4\n")).empty());
}

TEST(CrossField, KeepEveryIsAMultipleOfEvery) {
  EXPECT_EQ(one_error(with_train("checkpoint:\n  every: 100\n  keep_every: 250\n")),
            "job.yaml:3:15: checkpoint.keep_every: 250 is not a multiple of checkpoint.every "
            "(100): only saved steps can be kept, so it would keep the multiples of both; the "
            "nearest that keep what it says are 200 and 300");
  EXPECT_NE(one_error(with_train("checkpoint:\n  every: 100\n  keep_every: 30\n"))
                .find("the nearest that keep what it says are 100"),
            std::string::npos);
  for (const char* fine : {"every: 100\n  keep_every: 500", "every: 0\n  keep_every: 7",
                           "every: 3\n  keep_every: 0"}) {
    EXPECT_TRUE(load_errors(with_train(std::string("checkpoint:\n  ") + fine + "\n")).empty())
        << fine;
  }
}

TEST(CrossField, KeepBestNeedsEvaluations) {
  EXPECT_EQ(one_error(with_train("train:\n  eval_every: 0\ncheckpoint:\n  keep_best: true\n")),
            "job.yaml:4:14: checkpoint.keep_best: needs evaluations to tell the best checkpoint: "
            "set train.eval_every > 0");
  EXPECT_TRUE(
      load_errors(with_train("train:\n  eval_every: 5\ncheckpoint:\n  keep_best: true\n")).empty());
}

// A warning at or after the job's start requeued it for ever without training (cluster.time 1 with
// the default 120 s); none at all lost the steps since the last checkpoint at the limit.
TEST(CrossField, SlurmsWarningComesBeforeTheTimeLimit) {
  EXPECT_NE(one_error(with_train("cluster:\n  time: '1'\n"))
                .find("cluster.signal_grace_s: 120 s is not less than cluster.time 1 (60 s)"),
            std::string::npos);
  // The batch script asks for whole seconds, rounded up: 59.5 is --signal=B:USR1@60.
  EXPECT_NE(one_error(with_train("cluster:\n  time: '1'\n  signal_grace_s: 59.5\n"))
                .find("cluster.signal_grace_s: 59.5 s is not less than cluster.time 1 (60 s)"),
            std::string::npos);
  EXPECT_NE(one_error(with_train("cluster:\n  time: '1-00'\n  signal_grace_s: 0\n"))
                .find("cluster.signal_grace_s: is 0 with cluster.time 1-00: Slurm would send no "
                      "warning"),
            std::string::npos);
  for (const char* fine : {"'10'", "'02:00:00'", "'1-12:00'", "UNLIMITED", "'0'"}) {
    EXPECT_TRUE(load_errors(with_train("cluster:\n  time: " + std::string(fine) + "\n")).empty())
        << fine;
  }
  EXPECT_NE(
      one_error(with_train("cluster:\n  time: '99999999999'\n")).find("must be a Slurm time limit"),
      std::string::npos);
  EXPECT_EQ(slurm_time_seconds("1-02:03:04"), 93784);
  EXPECT_EQ(slurm_time_seconds("90:30"), 5430);
  EXPECT_EQ(slurm_time_seconds("2:00:00"), 7200);
  EXPECT_EQ(slurm_time_seconds("1-2"), 93600);
  EXPECT_EQ(slurm_time_seconds("1:2:3:4"), -1);
  EXPECT_EQ(slurm_time_seconds("1-"), -1);
}

// Evaluations with no validation data passed silently: no loss, no best checkpoint.
TEST(CrossField, EvaluationsNeedValidationData) {
  const std::string none = "data:\n  train: t.txt\n  val_fraction: 0\n";
  const std::vector<std::string> errors = load_errors(none + "train:\n  eval_every: 10\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("train.eval_every: is 10, but there is no validation data"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(one_error(none + "train:\n  eval_every: 10\ncheckpoint:\n  keep_best: true\n")
                .find("checkpoint.keep_best: needs validation losses, but there is no validation"),
            std::string::npos);
  EXPECT_TRUE(load_errors(none + "train:\n  eval_every: 0\n").empty());
  EXPECT_TRUE(load_errors(none + "  val: v.txt\ntrain:\n  eval_every: 10\n").empty());
  EXPECT_TRUE(load_errors(none + "  choices: hs.bin\ntrain:\n  eval_every: 10\n").empty());
}

// A stored job (an older run's config.yaml or checkpoint manifest) is read without the rules
// between keys: one added since (above) must not make the run's checkpoints unreadable, or its
// directory "a run of another job" (whose advice, --fresh, deletes them).
TEST(CrossField, StoredJobsAreReadWithoutThem) {
  const std::string older = "data:\n  train: t.txt\n  val_fraction: 0\ntrain:\n  eval_every: 10\n";
  EXPECT_THROW(load_job_from_string(older, "j"), JobConfigError);
  EXPECT_EQ(load_stored_job(older, "j").train.eval_every, 10);
  // Each key is still checked on its own.
  EXPECT_THROW(load_stored_job("data:\n  train: t.txt\nmodel:\n  width: abc\n", "j"),
               JobConfigError);
}

TEST(CrossField, ChoicesNeedAGptAndEvaluations) {
  const std::string data = "data:\n  train: t.txt\n  choices: hs.bin\n";
  EXPECT_EQ(one_error(data + "train:\n  eval_every: 0\n"),
            "job.yaml:3:12: data.choices: is scored at each evaluation: set train.eval_every > 0");
  EXPECT_EQ(one_error(data + "model:\n  type: mlp\n"),
            "job.yaml:3:12: data.choices: scores each position's prediction, which the mlp does "
            "not make: multiple-choice evaluation needs model.type gpt");
  EXPECT_TRUE(load_errors(data).empty());
}

TEST(CrossField, TrainDataRequired) {
  EXPECT_EQ(one_error("data:\n  val: v.bin\n"),
            "job.yaml:1:1: data.train: no training data: give at least one file or glob");
  EXPECT_EQ(one_error("data:\n  train: []\n"),
            "job.yaml:2:10: data.train: no training data: give at least one file or glob");
}

TEST(CrossField, VocabFitsTheDataFormat) {
  EXPECT_EQ(one_error("model:\n  vocab_size: 100000\ndata:\n  format: tokens\n  train: t.bin\n"),
            "job.yaml:2:15: model.vocab_size: must be <= 65536 for data.format tokens (token ids "
            "are uint16), got 100000");
  EXPECT_EQ(one_error(with_train("model:\n  vocab_size: 100\n")),
            "job.yaml:2:15: model.vocab_size: must be >= 256 for data.format text (a token is a "
            "byte), got 100");
  EXPECT_TRUE(load_errors(with_train("model:\n  vocab_size: 65536\n")).empty());
}

TEST(CrossField, OneGpuPerCudaRank) {
  const auto errors = load_errors(with_train("parallel:\n  backend: cuda\ncluster:\n  tasks_per_node: 8\n"
                                             "  gpus_per_node: 4\n"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0],
            "job.yaml:4:19: cluster.tasks_per_node: 8 ranks per node but cluster.gpus_per_node "
            "is 4; each rank of the cuda backend needs its own GPU");
  // auto (the default) takes a node's GPUs too: refused likewise, before the wait in the queue
  // (before: accepted, and every rank failed at start for want of its own GPU).
  const auto automatic =
      load_errors(with_train("cluster:\n  tasks_per_node: 8\n  gpus_per_node: 4\n"));
  ASSERT_EQ(automatic.size(), 1u);
  EXPECT_EQ(automatic[0],
            "job.yaml:2:19: cluster.tasks_per_node: 8 ranks per node but cluster.gpus_per_node "
            "is 4; each rank of the cuda backend needs its own GPU (parallel.backend auto takes "
            "the GPUs; set it to cpu to train on the CPUs)");
  EXPECT_TRUE(load_errors(with_train("parallel:\n  backend: cpu\ncluster:\n  tasks_per_node: 8\n"
                                     "  gpus_per_node: 4\n"))
                  .empty());
  EXPECT_TRUE(
      load_errors(with_train("cluster:\n  tasks_per_node: 4\n  gpus_per_node: 4\n")).empty());
  // Whether this machine has a GPU is decided when the job starts, not when it validates.
  EXPECT_TRUE(load_errors(with_train("parallel:\n  backend: cuda\n")).empty());
}

// Cross-field rules of the resilience section.
TEST(CrossField, RollbackNeedsCheckpoints) {
  EXPECT_TRUE(load_errors(with_train("parallel:\n  precision: bf16\n")).empty());
  EXPECT_EQ(one_error(with_train("resilience:\n  on_nan: rollback\n")),
            "job.yaml:2:11: resilience.on_nan: rollback needs checkpoints to roll back to: set "
            "checkpoint.every > 0");
  EXPECT_TRUE(load_errors(with_train("resilience:\n  on_nan: rollback\ncheckpoint:\n  every: 10\n"))
                  .empty());
}

// A trace window that begins after the last step records nothing: refused, not silently empty.
TEST(CrossField, TheTraceWindowBeginsWithinTheRun) {
  const std::string past = one_error(
      with_train("train:\n  steps: 10\nobservability:\n  trace: true\n  trace_start: 11\n"));
  EXPECT_NE(past.find("observability.trace_start: 11 is past train.steps (10): the trace window "
                      "would record nothing; set trace_start to at most 10"),
            std::string::npos)
      << past;
  // The default start (3) in a run of 2 steps.
  EXPECT_NE(one_error(with_train("train:\n  steps: 2\nobservability:\n  trace: true\n"))
                .find("observability.trace_start: 3 is past train.steps (2)"),
            std::string::npos);
  EXPECT_TRUE(load_errors(with_train("train:\n  steps: 10\nobservability:\n  trace: true\n  "
                                     "trace_start: 10\n"))
                  .empty());
  EXPECT_TRUE(
      load_errors(with_train("train:\n  steps: 2\nobservability:\n  trace_start: 11\n")).empty())
      << "no trace, no window";
}

// Counts and times with no sane use beyond a bound: refused by name (before: a million OpenMP
// threads, every collective timing out at once, an evaluation count wrapping in int).
TEST(KeyRules, ThreadsCollectiveTimeoutAndEvalBatchesAreBounded) {
  struct Case {
    const char* yaml;
    const char* key;
  };
  for (const Case& c : {Case{"parallel:\n  threads_per_rank: 1025\n", "parallel.threads_per_rank"},
                        Case{"parallel:\n  timeout_s: 0.5\n", "parallel.timeout_s"},
                        Case{"train:\n  eval_batches: 1000001\n", "train.eval_batches"}}) {
    const auto errors = load_errors(with_train(c.yaml));
    ASSERT_EQ(errors.size(), 1u) << c.yaml;
    EXPECT_NE(errors[0].find(std::string(c.key) + ": "), std::string::npos) << errors[0];
  }
  for (const char* ok : {"parallel:\n  threads_per_rank: 1024\n", "parallel:\n  timeout_s: 1\n",
                         "train:\n  eval_batches: 1000000\n"}) {
    EXPECT_TRUE(load_errors(with_train(ok)).empty()) << ok;
  }
}

// The watchdog: off, or at least a second.
TEST(CrossField, StepTimeoutIsOffOrAtLeastOneSecond) {
  EXPECT_EQ(one_error(with_train("resilience:\n  step_timeout_s: 0.5\n")),
            "job.yaml:2:19: resilience.step_timeout_s: must be 0 (off) or at least 1 second, got "
            "0.5: the watchdog would fire on the ordinary hiccups of a healthy run");
  for (const char* ok : {"0", "1", "60", "1800.5"}) {
    EXPECT_TRUE(
        load_errors(with_train(std::string("resilience:\n  step_timeout_s: ") + ok + "\n")).empty())
        << ok;
  }
}

TEST(CrossField, CheckJobOnACodeBuiltConfig) {
  JobConfig cfg;
  EXPECT_EQ(check_job(cfg, 1).size(), 1u);  // only the missing training data
  cfg.data.train = {"a.txt"};
  EXPECT_TRUE(check_job(cfg, 1).empty());
  cfg.model.heads = 7;
  ASSERT_EQ(check_job(cfg, 1).size(), 1u);
  EXPECT_EQ(check_job(cfg, 1)[0].str(), "model.width: 256 is not divisible by model.heads (7)");
}

}  // namespace
}  // namespace rm

// The step loop of one rank: micro-batches with gradient accumulation, the learning-rate
// schedule, global-norm clipping, AdamW, periodic validation, metrics, and the NaN policy.
//
// Sample order: optimizer step s consumes global sample indices [s*G, (s+1)*G) with
// G = train.global_batch; micro-batch j of rank r takes the contiguous slice starting at
// s*G + (j*R + r)*micro_batch. The set of samples in a step is therefore the same for any
// number of ranks R, and resuming only needs the step number.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "configs/job_config.h"
#include "worker/adamw_optimizer.h"
#include "worker/metrics_log.h"
#include "worker/model.h"
#include "worker/training_data.h"

namespace rm {

struct TrainerOptions {
  bool verbose = true;            // print the log line to stdout (rank 0)
  MetricsLog* metrics = nullptr;  // optional metrics.jsonl sink
};

class Trainer {
 public:
  // Plans every buffer once; initialises parameters from job.seed.
  Trainer(const JobConfig& job, TrainingData& data, TrainerOptions options = {});

  // One optimizer step (0-based index `step`); returns its metrics (val_loss not included).
  StepMetrics train_step(int64_t step);
  // Mean validation loss per target over train.eval_batches micro-batches of the first
  // validation windows (the same windows every time). Requires validation data.
  double evaluate();
  // Runs steps [next_step(), train.steps), logging and evaluating as configured.
  void run();

  int64_t next_step() const { return next_step_; }
  Model& model() { return *model_; }
  std::vector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }
  const JobConfig& job() const { return job_; }

 private:
  JobConfig job_;
  TrainingData& data_;
  TrainerOptions options_;
  int accum_steps_;
  std::unique_ptr<Model> model_;
  std::vector<float> params_, grads_;
  std::unique_ptr<AdamWOptimizer> optimizer_;
  std::vector<int> inputs_, targets_;
  int64_t next_step_ = 0;
};

}  // namespace rm

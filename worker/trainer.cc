#include "worker/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "worker/evaluate.h"
#include "worker/lr_schedule.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

Trainer::Trainer(const JobConfig& job, TrainingData& data, TrainerOptions options)
    : job_(job), data_(data), options_(options) {
  const int ranks = 1;
  accum_steps_ = job.train.global_batch / (job.train.micro_batch * ranks);
  model_ = make_model(job.model, job.train.micro_batch);
  params_.assign(model_->layout().size(), 0.0f);
  grads_.assign(model_->layout().size(), 0.0f);
  model_->init_params(params_.data(), job.seed);
  optimizer_ = std::make_unique<AdamWOptimizer>(job.optimizer, model_->layout());
  const size_t tokens = static_cast<size_t>(job.train.micro_batch) * job.model.seq_len;
  inputs_.assign(tokens, 0);
  targets_.assign(tokens, 0);
}

StepMetrics Trainer::train_step(int64_t step) {
  const auto t0 = Clock::now();
  const TrainConfig& tc = job_.train;
  const int rank = 0, ranks = 1;
  const double lr = learning_rate(job_.optimizer, step, tc.steps);
  const double targets_in_batch =
      static_cast<double>(tc.global_batch) * model_->targets_per_sample();
  // Every micro-batch's loss gradient is divided by the targets in the whole global batch, so
  // the summed gradient is that of the mean loss, whatever the split into micro-batches.
  const float grad_scale = static_cast<float>(1.0 / targets_in_batch);

  std::memset(grads_.data(), 0, grads_.size() * sizeof(float));
  double loss_sum = 0;
  for (int j = 0; j < accum_steps_; ++j) {
    const uint64_t first = static_cast<uint64_t>(step) * tc.global_batch +
                           static_cast<uint64_t>(j * ranks + rank) * tc.micro_batch;
    data_.train->fill_batch(job_.seed, first, tc.micro_batch, inputs_.data(), targets_.data());
    loss_sum += model_->forward_backward(params_.data(), grads_.data(), inputs_.data(),
                                         targets_.data(), tc.micro_batch, grad_scale, nullptr);
  }

  StepMetrics m;
  m.step = step + 1;
  m.lr = lr;
  m.loss = loss_sum / targets_in_batch;
  m.grad_norm = AdamWOptimizer::grad_norm(grads_.data(), grads_.size());
  if (!std::isfinite(m.loss) || !std::isfinite(m.grad_norm)) {
    const std::string what = "step " + std::to_string(step + 1) + ": non-finite " +
                             (std::isfinite(m.loss) ? "gradient norm" : "loss");
    if (job_.resilience.on_nan == "skip") {
      m.skipped = true;
    } else if (job_.resilience.on_nan == "rollback") {
      throw std::runtime_error(what + " (resilience.on_nan: rollback restarts from the last "
                                      "checkpoint; this run has none to roll back to)");
    } else {
      throw std::runtime_error(what + " (resilience.on_nan: abort)");
    }
  }
  if (!m.skipped) optimizer_->step(params_.data(), grads_.data(), lr, m.grad_norm);
  next_step_ = step + 1;
  m.step_ms = ms_since(t0);
  m.tokens_per_s = static_cast<double>(tc.global_batch) * model_->targets_per_sample() /
                   (m.step_ms / 1e3);
  return m;
}

double Trainer::evaluate() {
  if (!data_.val) throw std::logic_error("evaluate: the job has no validation data");
  const uint64_t windows = static_cast<uint64_t>(job_.train.eval_batches) * job_.train.micro_batch;
  return evaluate_windows(*model_, params_.data(), *data_.val, windows).mean_loss;
}

void Trainer::run() {
  const TrainConfig& tc = job_.train;
  for (int64_t step = next_step_; step < tc.steps; ++step) {
    StepMetrics m = train_step(step);
    const bool last = step + 1 == tc.steps;
    if (data_.val && tc.eval_every > 0 && (m.step % tc.eval_every == 0 || last)) {
      m.val_loss = evaluate();
    }
    if (options_.metrics) options_.metrics->write(m);
    if (options_.verbose && (m.step % tc.log_every == 0 || m.step == 1 || last || m.val_loss)) {
      std::printf("%s\n", format_log_line(m, tc.steps).c_str());
      std::fflush(stdout);
    }
  }
}

}  // namespace rm

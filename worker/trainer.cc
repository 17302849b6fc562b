#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "base/elapsed.h"
#include "base/exit_codes.h"
#include "base/input_error.h"
#include "base/run_dir.h"
#include "base/stop_signal.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "model/lr_schedule.h"
#include "observe/run_events.h"
#include "worker/checkpoint_line.h"
#include "worker/fault_injection.h"
#include "worker/finished_run.h"
#include "worker/initial_weights.h"
#include "worker/memory_salvage.h"
#include "worker/step_agreement.h"
#include "worker/watchdog.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Trainer::Trainer(const JobConfig& job, TrainingData& data, Communicator& comm,
                 TrainerOptions options)
    : job_(job), data_(data), comm_(comm),
      host_comm_(options.host_comm != nullptr ? *options.host_comm : comm), options_(options) {
  const int per_step = job.train.micro_batch * comm.size();
  if (job.train.global_batch % per_step != 0) {
    throw std::invalid_argument("train.global_batch " + std::to_string(job.train.global_batch) +
                                " is not a multiple of micro_batch x ranks = " +
                                std::to_string(per_step));
  }
  accum_steps_ = job.train.global_batch / per_step;
  // Without a Compute the model makes a cpu one of its own.
  model_ = make_model(job.model, job.train.micro_batch, options.compute, job.parallel.precision);
  state_ = std::make_unique<ShardedState>(job_, *model_, comm, &host_comm_);
  state_->set_progress(&progress_);
  if (job.observability.trace) {
    trace_ = std::make_unique<TraceRecorder>(job.run_dir, comm.rank(), comm.size(),
                                             job.observability.trace_start,
                                             job.observability.trace_steps);
    trace_->install();
    progress_.set_observer(trace_.get());
    state_->set_trace(trace_.get());
  }
  state_->init_params(job.seed);
  const size_t tokens = static_cast<size_t>(job.train.micro_batch) * job.model.seq_len;
  inputs_.assign(tokens, 0);
  targets_.assign(tokens, 0);
  if (!data_.choices.empty()) plan_choices();
  std::string why_not;
  if (StepGraph::wanted(job, model_->compute(), comm.backend(), &why_not)) {
    graph_ = std::make_unique<StepGraph>(model_->compute(), accum_steps_, tokens);
  }
  if (comm.rank() == 0 && options.verbose && (graph_ || !why_not.empty())) {
    std::printf("ringmaster: step graphs: %s\n",
                graph_ ? "each step's forward and backward replayed as one graph from step 2 on "
                         "(RM_CUDA_GRAPH=0: off)"
                       : ("none: " + why_not).c_str());
    std::fflush(stdout);
  }
}

StepMetrics Trainer::train_step(int64_t step) {
  if (trace_) trace_->begin_step(step + 1);
  const auto t0 = Clock::now();
  progress_.enter(Phase::kData, step + 1);
  maybe_inject_fault(comm_.rank(), step + 1);
  if (fault_poisons_weights(comm_.rank(), step + 1)) state_->poison_first_param();
  const TrainConfig& tc = job_.train;
  const int rank = comm_.rank(), ranks = comm_.size();
  const double lr = learning_rate(job_.optimizer, step, tc.steps);
  const double targets_in_batch =
      static_cast<double>(tc.global_batch) * model_->targets_per_sample();
  // Every micro-batch's loss gradient is divided by the targets in the whole global batch and
  // ranks sum their gradients, so the result is the gradient of the global mean loss whatever
  // the split into ranks and micro-batches.
  const float grad_scale = static_cast<float>(1.0 / targets_in_batch);

  // What decides the update stays on the device until the update is queued: the loss goes into
  // the step's scalars beside the gradient's sum of squares (ShardedState::queue_optimizer_step),
  // and the AdamW kernel skips the update itself when either is not finite. The host reads them
  // once the step's work is all queued: on one GPU the step's only waits for the device.
  double data_ms = 0;
  // Micro-batch j's first sequence in the global sample order: what its data and its random
  // draws (model.dropout) are keyed by, the same on any number of ranks.
  const auto first_sample = [&](int j) {
    return static_cast<uint64_t>(batch_index(step)) * tc.global_batch +
           static_cast<uint64_t>(j * ranks + rank) * tc.micro_batch;
  };
  const auto fill = [&](int j, int* inputs, int* targets) {
    const uint64_t first = first_sample(j);
    progress_.enter(Phase::kData);
    const auto t_data = Clock::now();
    data_.train->fill_batch(job_.seed, first, tc.micro_batch, inputs, targets);
    data_ms += ms_since(t_data);
  };
  StepScalars* const scalars = state_->step_scalars();
  auto t_backward = Clock::now();
  if (graph_ && graph_->ready()) {
    // The micro-batches' device work as recorded (step_graph.h): only the tokens are new.
    for (int j = 0; j < accum_steps_; ++j) fill(j, graph_->inputs(j), graph_->targets(j));
    progress_.enter(Phase::kForward);
    graph_->replay();
    ++steps_replayed_;
    t_backward = Clock::now();
    timing_.comm_wait_ms = 0;
  } else {
    // The step's device work, recorded (record: non-null) or run as it is queued.
    const auto queue_step = [&](StepGraph* record) {
      StepGraph::Recording recording(record);
      state_->begin_step();
      for (int j = 0; j < accum_steps_; ++j) {
        int* const inputs = graph_ ? graph_->inputs(j) : inputs_.data();
        int* const targets = graph_ ? graph_->targets(j) : targets_.data();
        fill(j, inputs, targets);
        state_->begin_micro_batch(j == accum_steps_ - 1);
        progress_.enter(Phase::kForward);  // ShardedState marks backward
        model_->queue_forward_backward(*state_, inputs, targets, tc.micro_batch, grad_scale,
                                       MicroBatchKey{job_.seed, first_sample(j)});
      }
      t_backward = Clock::now();
      progress_.enter(Phase::kGradientSync);
      state_->finish_backward();
      timing_.comm_wait_ms = ms_since(t_backward);
      model_->queue_loss_copy(&scalars->loss_sum);
      recording.commit();
    };
    // Recorded from the process's second step on, when step graphs are on.
    StepGraph* const record =
        graph_ && record_graphs_ && steps_run_ > 0 && graph_->can_record() ? graph_.get() : nullptr;
    try {
      queue_step(record);
      if (record != nullptr) {
        ++steps_replayed_;  // commit() ran the recording
        if (rank == 0 && options_.verbose) {
          // Said when a graph exists and has run, not when one was asked for: what the
          // sitting's scripts look for before they call a run's speed the graphs' (gpu-speed.sh).
          std::printf(
              "ringmaster: step graphs: step %lld recorded as one graph and run; "
              "the steps after it replay it\n",
              static_cast<long long>(step + 1));
          std::fflush(stdout);
        }
      }
    } catch (const std::exception& e) {
      if (record == nullptr) throw;
      // A recording ran nothing, so the step can still run as it is queued; the graphs are
      // given up for the rest of the run (what failed would fail again), not the run.
      record_graphs_ = false;
      if (rank == 0 && options_.verbose) {
        std::printf(
            "ringmaster: step graphs: recording step %lld failed (%s); every step "
            "runs call by call from now on\n",
            static_cast<long long>(step + 1), e.what());
        std::fflush(stdout);
      }
      data_ms = 0;
      queue_step(nullptr);
    }
  }
  ++steps_run_;
  const bool poisoned = fault_poisons_loss(rank, step + 1);
  if (poisoned) {
    const double nan = std::nan("");
    model_->compute().upload(&scalars->loss_sum, &nan, sizeof(nan));
  }
  if (checkpoints_) {
    // A save started after the previous step may still be copying the buffers the update is
    // about to change; it has had this step's forward and backward to finish.
    progress_.enter(Phase::kCheckpointWait);
    checkpoints_->wait_staged();
  }
  progress_.enter(Phase::kOptimizer);
  // resilience.spike_*_zscore: the limits of an ordinary step, from the steps before this one.
  const ResilienceConfig& rc = job_.resilience;
  StepLimits limits;
  limits.loss_sum = loss_window_.limit(rc.spike_loss_zscore) * targets_in_batch;
  limits.grad_norm = norm_window_.limit(rc.spike_norm_zscore);
  state_->queue_optimizer_step(lr, limits);

  double loss_sum = model_->take_loss_sum();
  if (poisoned) loss_sum = std::nan("");
  const ShardedState::StepOutcome outcome = state_->finish_optimizer_step();
  // The stop flag and the per-rank figures ride in the collective that sums the loss: every
  // rank learns whether any rank was signalled, at the same step, for free.
  stop_signal_ = stop_signal_received();
  const StepAgreement agreed =
      agree_on_step(host_comm_, {loss_sum, stop_signal_ != 0,
                                 std::chrono::duration<double, std::milli>(t_backward - t0).count(),
                                 peak_rss_mib()});
  stop_requested_ = agreed.stop;

  StepMetrics m;
  m.step = step + 1;
  m.lr = lr;
  m.loss = agreed.loss_sum / targets_in_batch;
  m.data_ms = data_ms;
  m.comm_wait_ms = timing_.comm_wait_ms;
  m.busy_ms_max = agreed.busy_ms_max;
  m.busy_ms_min = agreed.busy_ms_min;
  m.slowest_rank = agreed.slowest_rank;
  m.peak_rss_mib = agreed.peak_rss_mib;
  m.grad_norm = outcome.grad_norm;
  if (checkpoints_) m.ckpt_stall_ms = checkpoints_->take_blocked_ms();
  // The loss and the norm are global, so every rank takes the same decision here, and the
  // device took it already: it skipped the update exactly when one of them is not finite, or
  // passed its limit (a spike: decided from the device's own sums, which the host has too).
  const bool finite = std::isfinite(m.loss) && std::isfinite(m.grad_norm);
  const bool loss_spike = finite && outcome.loss_sum > limits.loss_sum;
  const bool spike = loss_spike || (finite && outcome.grad_norm > limits.grad_norm);
  if (outcome.applied != (finite && !spike)) {
    throw std::logic_error("step " + std::to_string(step + 1) + ": the device " +
                           (outcome.applied ? "applied" : "skipped") +
                           " the update, but the host sees a " +
                           (finite ? "finite" : "non-finite") + " loss and gradient norm" +
                           (spike    ? ", a spike"
                            : finite ? " within their limits"
                                     : ""));
  }
  if (spike) {
    m.skipped = true;
    m.spike = loss_spike ? "loss" : "grad_norm";
    if (rank == 0) {
      append_run_event(
          job_.run_dir, "spike_skipped",
          {{"step", m.step},
           {"what", m.spike},
           {"value", loss_spike ? outcome.loss_sum / targets_in_batch : m.grad_norm},
           {"limit", loss_spike ? limits.loss_sum / targets_in_batch : limits.grad_norm}});
    }
  }
  // Every finite value enters its window, a spike's too (outlier_window.h).
  loss_window_.push(m.loss);
  norm_window_.push(m.grad_norm);
  if (!finite) {
    const std::string what = "step " + std::to_string(step + 1) + ": non-finite " +
                             (std::isfinite(m.loss) ? "gradient norm" : "loss");
    if (job_.resilience.on_nan == OnNan::kSkip) {
      m.skipped = true;
    } else if (job_.resilience.on_nan == OnNan::kRollback && checkpoints_) {
      m.skipped = true;
      m.rollback = true;
    } else {
      throw std::runtime_error(what + " (resilience.on_nan: " + choice_name(job_.resilience.on_nan) +
                               (checkpoints_ ? ")" : ", and no checkpoints to roll back to)"));
    }
  }
  next_step_ = step + 1;
  m.step_ms = ms_since(t0);
  timing_.compute_ms = m.step_ms - timing_.comm_wait_ms;
  m.tokens_per_s = targets_in_batch / (m.step_ms / 1e3);
  return m;
}

double Trainer::evaluate() {
  if (!data_.val) throw std::logic_error("evaluate: the job has no validation data");
  // Rank r takes micro-batches r, r+R, ...; every rank runs the same number of forwards (a
  // ZeRO-3 forward is collective), the surplus ones counting nothing.
  const int B = job_.train.micro_batch, R = comm_.size();
  const int rounds = (job_.train.eval_batches + R - 1) / R;
  double sums[2] = {0, 0};  // loss, targets
  progress_.enter(Phase::kEvaluate);
  for (int i = 0; i < rounds; ++i) {
    progress_.beat();
    const int j = i * R + comm_.rank();
    const bool counted = j < job_.train.eval_batches;
    data_.val->fill_eval_batch(static_cast<uint64_t>(counted ? j : 0) * B, B, inputs_.data(),
                               targets_.data());
    const double loss = model_->forward_loss(*state_, inputs_.data(), targets_.data(), B);
    if (counted) {
      sums[0] += loss;
      sums[1] += static_cast<double>(B) * model_->targets_per_sample();
    }
  }
  host_comm_.all_reduce(sums, 2, DType::kFloat64, ReduceOp::kSum)->wait();
  return sums[0] / sums[1];
}

void Trainer::plan_choices() {
  // Example e is rank e % R's, in passes of micro_batch rows. The cuda backend is given whole
  // seq_len rows only: the shapes its kernels were tested at. Every rank runs as many passes
  // as the busiest, agreed here rather than worked out from each rank's copy of the file.
  const size_t R = static_cast<size_t>(comm_.size());
  const int row_len = choice_row_len(*model_);
  std::vector<size_t> mine;
  for (size_t e = static_cast<size_t>(comm_.rank()); e < data_.choices.size(); e += R) {
    mine.push_back(e);
  }
  choice_passes_ = plan_choice_passes(data_.choices, mine, job_.train.micro_batch, row_len);
  choice_filler_ = plan_choice_passes(data_.choices, {0}, job_.train.micro_batch, row_len).front();
  // Each rank's count to all (no collective reduces to a maximum), then the largest.
  std::vector<double> counts(R, 0.0);
  counts[static_cast<size_t>(comm_.rank())] = static_cast<double>(choice_passes_.size());
  host_comm_.all_gather(counts.data(), std::vector<size_t>(R, 1), DType::kFloat64)->wait();
  choice_rounds_ = 0;
  for (double c : counts) choice_rounds_ = std::max(choice_rounds_, static_cast<size_t>(c));
}

double Trainer::choice_accuracy() {
  ChoiceTally tally(data_.choices);
  progress_.enter(Phase::kEvaluate);
  for (size_t i = 0; i < choice_rounds_; ++i) {
    progress_.beat();
    const bool counted = i < choice_passes_.size();
    const ChoicePass& pass = counted ? choice_passes_[i] : choice_filler_;
    const std::vector<double> means = score_choice_pass(*model_, *state_, data_.choices, pass);
    if (counted) tally.add(pass, means);
  }
  double sums[2] = {static_cast<double>(tally.result().correct),
                    static_cast<double>(tally.result().examples)};
  host_comm_.all_reduce(sums, 2, DType::kFloat64, ReduceOp::kSum)->wait();
  return sums[0] / sums[1];
}

void Trainer::enable_checkpoints(const std::string& resolved_job) {
  checkpoints_ = std::make_unique<Checkpointing>(job_, resolved_job, *model_, *state_, host_comm_);
  checkpoints_->set_trace(trace_.get());
  if (job_.checkpoint.memory_every > 0) {
    memory_ = std::make_unique<MemoryCheckpoints>(job_, *state_, model_->compute(), host_comm_,
                                                  options_.host_of_rank);
    if (comm_.rank() == 0 && options_.verbose) {
      std::printf("ringmaster: in-memory checkpoints every %lld step(s); %s\n",
                  static_cast<long long>(job_.checkpoint.memory_every),
                  memory_->replicated()
                      ? "each rank's slice also kept by a rank on the next host"
                      : ("no replicas (" + memory_->why_not_replicated() + ")").c_str());
      std::fflush(stdout);
    }
  }
}

void Trainer::discard_memory_checkpoints() {
  if (memory_) memory_->discard();
}

int Trainer::failed_checkpoint_saves() const {
  return checkpoints_ ? checkpoints_->failed_saves() : 0;
}

void Trainer::forget_memory_checkpoints() {
  // What memory held was not taken: older steps, or newer ones of another rank layout or shard
  // mode (a run moved onto other ranks and back). A later restart before this attempt's first
  // memory save would restore the latter, past the metrics.jsonl this resume cut back to its
  // step: those steps' lines lost for good, and a state of another attempt.
  discard_memory_checkpoints();
  host_comm_.barrier();  // every rank of this host is done with its own
  const std::vector<int>& host = options_.host_of_rank;
  const int me = comm_.rank();
  const bool first_on_host =
      host.empty()
          ? me == 0
          : std::find(host.begin(), host.end(), host[static_cast<size_t>(me)]) - host.begin() == me;
  // Other layouts' segments too. The first memory save comes after a step's collectives, which
  // this rank joins only once it is done here.
  if (first_on_host) {
    const std::string removed = remove_run_memory_checkpoints(job_.run_dir);
    if (!removed.empty() && me == 0) {
      std::printf(
          "ringmaster: %s (none held a step this layout can restore that is newer than "
          "the disk's)\n",
          removed.c_str());
      std::fflush(stdout);
    }
  }
}

namespace {

// The newest committed checkpoint's step by its directory's name (not verified; -1: none),
// rank 0's view, known to every rank.
int64_t newest_disk_step(const std::string& run_dir, Communicator& comm) {
  double newest = -1;
  if (comm.rank() == 0) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(checkpoints_root(run_dir), ec)) {
      const auto parsed = parse_step_dir_name(e.path().filename().string());
      if (parsed && parsed->committed) newest = std::max(newest, static_cast<double>(parsed->step));
    }
  }
  comm.broadcast(&newest, 1, DType::kFloat64, 0)->wait();
  return static_cast<int64_t>(newest);
}

}  // namespace

void Trainer::restore_best(const nlohmann::json& state) {
  best_step_ = state.is_object() ? state.value("best_step", int64_t{0}) : 0;
  best_val_loss_ = state.is_object() ? state.value("best_val_loss", 0.0) : 0.0;
}

void Trainer::restore_best_from_disk() {
  // Every new best was saved to disk, so the newest committed checkpoint holds the best up to its
  // step. Rank 0 reads its manifest (structure only: no shard is read) and tells the others.
  // The line memory's steps are on is that checkpoint's too (a --from resume discards memory; a
  // restart before the line's first save finds the line's start newest: line.json says which),
  // or, where the run has none, the line's that --from began in it (line.json).
  double best[2] = {0, 0};  // loss, step
  std::string line;
  if (comm_.rank() == 0) {
    const auto list = list_checkpoints(job_.run_dir, VerifyLevel::kStructure);
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      if (!it->committed || !it->verify.ok) continue;
      const nlohmann::json& state = load_manifest(it->path).state;
      if (state.is_object()) {
        if (job_.checkpoint.keep_best) {
          best[0] = state.value("best_val_loss", 0.0);
          best[1] = static_cast<double>(state.value("best_step", int64_t{0}));
        }
        line = line_of_checkpoint(job_.run_dir, it->path, state).dump();
      }
      break;
    }
    // None of its own yet: memory's steps are on the line a --from began there (line.json), and
    // the best up to them is its start's, as a resume from that start carries it (before: 0, so
    // the line's next evaluation counted as a new best: a save, checkpoints/best moved).
    if (line.empty()) {
      const nlohmann::json started = recorded_line_start(job_.run_dir);
      if (!started.is_null()) {
        line = started.dump();
        if (job_.checkpoint.keep_best) {
          try {
            const std::string start = started.value("checkpoint", "");
            const nlohmann::json& state = load_manifest(start).state;
            if (state.is_object() && checkpoint_line_origin(start).value("manifest_digest", "") ==
                                         started.value("manifest_digest", "")) {
              best[0] = state.value("best_val_loss", 0.0);
              best[1] = static_cast<double>(state.value("best_step", int64_t{0}));
            }
          } catch (const std::exception&) {
            // Gone or changed since: no best known, as before any evaluation.
          }
        }
      }
    }
  }
  host_comm_.broadcast(best, 2, DType::kFloat64, 0)->wait();
  line = broadcast_string(host_comm_, line, 0);
  restore_best({{"best_val_loss", best[0]}, {"best_step", static_cast<int64_t>(best[1])}});
  line_from_ = line.empty() ? nlohmann::json() : nlohmann::json::parse(line);  // "null": none
}

namespace {

std::string fingerprint_hex(uint64_t fingerprint) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

}  // namespace

void Trainer::check_train_data(uint64_t windows, uint64_t fingerprint,
                               const std::string& kind) const {
  const uint64_t now = data_.train->num_windows();
  const std::string checkpoint = "the " + (kind.empty() ? "" : kind + " ") + "checkpoint";
  // Resumed from a checkpoint given with --from: starting over (--fresh, a new run_dir) with the
  // same --from fails the same way; model.init_from takes its weights to train this data.
  const bool given = kind.empty() && checkpoints_ && !checkpoints_->started_from().empty();
  const std::string fix =
      given ? ": the data differs from what it was trained on (the data order of a resumed run "
              "depends on it); give the same data, or, to train this data from its weights, "
              "name it as model.init_from instead of --from (the optimizer state and the data "
              "order then start anew)"
            : ": the data changed since (the data order of a resumed run depends on it); put the "
              "data back, or start over (--fresh, or a new run_dir)";
  if (windows != now) {
    throw InputError("data.train holds " + std::to_string(now) + " training windows of " +
                     std::to_string(job_.model.seq_len) + " tokens, where " + checkpoint +
                     " resumed from was trained on " + std::to_string(windows) + fix);
  }
  if (fingerprint != 0 && fingerprint != data_.train->fingerprint()) {
    throw InputError("data.train holds the " + std::to_string(now) + " training windows " +
                     checkpoint +
                     " resumed from was trained on, but other tokens (its files' "
                     "sizes, order or first and last tokens differ)" +
                     fix);
  }
}

std::optional<int64_t> Trainer::resume_from_memory(int64_t step, const std::string& account,
                                                   int64_t disk_step) {
  MemoryCheckpoints::Restored restored;
  try {
    restored = memory_->restore(step);
  } catch (const MemoryRestoreError& e) {
    // Every rank is here: the failure was agreed. The caller restores the disk's newest
    // checkpoint over the partly written state. What memory holds must not be tried again by a
    // restart (the same slot, the same failure, until resilience.max_restarts ends the run).
    if (comm_.rank() == 0) {
      std::printf("ringmaster: %s; resuming from the disk instead (%s)\n", e.what(),
                  account.c_str());
      std::fflush(stdout);
      append_run_event(job_.run_dir, "memory_restore_failed",
                       {{"step", step}, {"error", e.what()}});
    }
    // Gone now, before the disk is read: if that fails too, a restart must not agree on them.
    memory_->discard();
    return std::nullopt;
  }
  // As from the disk: the data order goes on only over the data it was trained on.
  if (restored.train_windows != 0) {
    check_train_data(restored.train_windows, restored.train_fingerprint, "in-memory");
  }
  skipped_batches_ = std::move(restored.skipped_batches);
  next_step_ = step;
  // The disk holds this step too (its newest checkpoint, by name; memory was taken as it is at
  // least as new): no save of it again, which would replace that checkpoint under its readers.
  if (step == disk_step) checkpoints_->note_saved(step);
  if (comm_.rank() == 0) {
    const std::string disk =
        disk_step < 0 ? "no disk checkpoint" : "disk: step " + std::to_string(disk_step);
    std::printf("ringmaster: resuming from memory (step %lld; %s); %s\n",
                static_cast<long long>(step), disk.c_str(), account.c_str());
    std::fflush(stdout);
    append_run_event(job_.run_dir, "resumed",
                     {{"from", "memory"}, {"step", step}, {"disk_step", disk_step},
                      {"memory", account}, {"skipped", nlohmann::json::array()}});
  }
  return next_step_;
}

void Trainer::salvage_shrunk_layout() {
  const int old_ranks = shrunk_from_ranks();
  if (old_ranks <= 0 || old_ranks == host_comm_.size()) return;
  const int64_t disk = newest_disk_step(job_.run_dir, host_comm_);
  const SalvagedStep salvaged = salvage_memory_layout(
      job_, model_->layout().size(), old_ranks, host_comm_, disk,
      [&](int64_t step, int64_t optimizer_steps, const std::vector<int64_t>& skipped,
          uint64_t train_windows, uint64_t train_fingerprint,
          const std::vector<ShardFileInfo>& files) {
        skipped_batches_ = skipped;
        // The data that step was trained on, as its slot records it, not the data open now: the
        // resume from this checkpoint checks the one against the other (unrecorded: unchecked).
        nlohmann::json state = data_state(step);
        state.erase("train_fingerprint");
        if (train_fingerprint != 0) state["train_fingerprint"] = fingerprint_hex(train_fingerprint);
        if (train_windows != 0) {
          state["train_windows"] = train_windows;
        } else {
          state.erase("train_windows");
        }
        checkpoints_->commit_written(step, optimizer_steps, old_ranks, state, files);
      });
  if (comm_.rank() == 0 && !salvaged.account.empty()) {
    std::printf("ringmaster: %s%s%s%s\n", salvaged.account.c_str(),
                salvaged.step ? "; written to disk, to reshard from" : "",
                salvaged.skipped.empty() ? "" : "; ", salvaged.skipped.c_str());
    std::fflush(stdout);
    append_run_event(job_.run_dir, "memory_salvaged",
                     {{"from_ranks", old_ranks},
                      {"step", salvaged.step ? nlohmann::json(*salvaged.step) : nlohmann::json()},
                      {"account", salvaged.account}, {"skipped", salvaged.skipped}});
  }
}

void Trainer::load_initial_weights() {
  try {
    // Every piece is checked as it is read (the launcher checked every checksum too, before
    // the ranks started: check_job). A run directory's newest checkpoint, or where
    // checkpoints/best points, may change while the ranks start (the source run still
    // training): rank 0 resolves the source once and the others open what it found. Each
    // rank's source pins a checkpoint from retention while it lives, and rank 0 keeps its own
    // until every rank has opened (the barrier): the source run cannot remove it in between.
    const std::string& from = job_.model.init_from;
    std::unique_ptr<InitialWeights> source;
    if (comm_.rank() == 0) {
      source = std::make_unique<InitialWeights>(from, job_.model, model_->layout(),
                                                VerifyLevel::kStructure);
    }
    const std::string pinned =
        broadcast_string(host_comm_, source ? source->source() : std::string(), 0);
    if (!source) {
      maybe_delay_initial_weights(comm_.rank());
      source = std::make_unique<InitialWeights>(from, job_.model, model_->layout(),
                                                VerifyLevel::kStructure, pinned);
    }
    // A file source (safetensors, llm.c) has no checksums: the ranks, which may read it on other
    // hosts, each from its own copy, check that they found one file -- and, once read, that it
    // did not change under them -- or the replicas would start from different weights.
    const std::string lead_file = broadcast_string(host_comm_, source->file_identity(), 0);
    if (lead_file != source->file_identity()) {
      throw InitialWeightsError("model.init_from: " + from + ": rank " +
                                std::to_string(comm_.rank()) + " found another file (" +
                                source->file_identity() + ") than rank 0 (" + lead_file +
                                "): every rank must read the same weights");
    }
    host_comm_.barrier();
    state_->load_params(
        [&](size_t begin, size_t end, float* dst) { source->read(begin, end, dst); });
    source->check_unchanged();
    if (comm_.rank() == 0) {
      if (options_.verbose) {
        std::printf("ringmaster: weights from %s: %s\n", from.c_str(),
                    source->description().c_str());
        std::fflush(stdout);
      }
      append_run_event(job_.run_dir, "initialized", source->event_fields());
    }
  } catch (const InitialWeightsError& e) {
    if (comm_.size() == 1) throw;
    // Bad input still (exit 2); the peers may be waiting in a collective already.
    comm_.abort(e.what(), kExitBadInput);
  }
}

bool Trainer::memory_keeps_end(int64_t step) {
  double keeps = comm_.rank() == 0 && !memory_keeps_finished_end(job_, step) ? 0 : 1;
  host_comm_.broadcast(&keeps, 1, DType::kFloat64, 0)->wait();
  return keeps != 0;
}

int64_t Trainer::resume(const std::string& path, const std::string& line_start) {
  if (!checkpoints_) throw std::logic_error("resume: checkpoints are not enabled");
  line_start_ = !path.empty() ? path : line_start;
  if (memory_ && path.empty()) {
    // Memory snapshots keep what a resume needs, not the best so far: that comes from the disk,
    // before a salvage below commits a checkpoint of its own that must carry it on.
    restore_best_from_disk();
    salvage_shrunk_layout();
    const MemoryCheckpoints::Agreed held = memory_->agree_on_step();
    // A finished run's end that memory lacks: the disk decides (its newest checkpoint the end, or
    // a refusal), as it does where no memory is kept.
    const bool usable = held.step && memory_keeps_end(*held.step);
    const int64_t disk = newest_disk_step(job_.run_dir, host_comm_);
    bool memory_failed = false;
    if (usable && *held.step >= disk) {
      if (const std::optional<int64_t> s = resume_from_memory(*held.step, held.account, disk)) {
        return *s;
      }
      memory_failed = true;
    }
    if (comm_.rank() == 0 && !memory_failed) {
      std::string why = "the disk holds a newer checkpoint";
      if (!held.step) {
        why = "no step that every rank holds, so not from memory";
      } else if (!usable) {
        const std::optional<int64_t> end = finished_runs_end(job_.run_dir);
        why = "not from memory: step " + std::to_string(*held.step) +
              (end ? " is before the run's end at step " + std::to_string(*end) +
                         " (weights.bin), which going on from it would remove"
                   : " may be before the run's end (weights.bin; its step is not known: no "
                     "'finished' event), which going on from it would remove");
      }
      std::printf("ringmaster: %s; %s\n", held.account.c_str(), why.c_str());
      std::fflush(stdout);
    }
    next_step_ = checkpoints_->resume(path, line_start);
    // The newest disk checkpoint did not verify and an older one was taken: memory may be newer.
    if (usable && !memory_failed && *held.step > next_step_) {
      if (const std::optional<int64_t> s =
              resume_from_memory(*held.step, held.account, next_step_)) {
        return *s;
      }
      // Failed: the state is partly memory's now; the disk's checkpoint is restored again.
      memory_failed = true;
      next_step_ = checkpoints_->resume(path, line_start);
    }
    forget_memory_checkpoints();
    if (memory_failed && next_step_ == 0) {
      // No checkpoint on disk to restore over what memory wrote: this attempt cannot start
      // from step 0 on that state. The segments are gone, so the next attempt starts anew.
      throw std::runtime_error(
          "the in-memory checkpoint could not be restored and no disk checkpoint verifies; the "
          "state is partly overwritten, so this attempt ends (a restart starts from step 0)");
    }
  } else {
    next_step_ = checkpoints_->resume(path, line_start);
  }
  // The batches skipped by rollbacks before the checkpoint are skipped again.
  skipped_batches_.clear();
  const nlohmann::json& state = checkpoints_->resumed_state();
  // The data order is a function of the step and of how many windows the training data holds:
  // data.train replaced by a file of another size at the same path would go on in another order
  // from here, silently. Checkpoints written before 2026-11-30 do not record it.
  // Checkpoints written before 2026-12-02 do not record the fingerprint.
  if (state.contains("train_windows") && state["train_windows"].is_number_unsigned()) {
    uint64_t fingerprint = 0;
    const auto recorded = state.find("train_fingerprint");
    if (recorded != state.end() && recorded->is_string()) {
      fingerprint = std::strtoull(recorded->get<std::string>().c_str(), nullptr, 16);
    }
    check_train_data(state["train_windows"].get<uint64_t>(), fingerprint, "");
  }
  check_validation_data(state);
  restore_best(state);
  const std::string& given = checkpoints_->started_from();
  line_from_ = given.empty() ? line_of_checkpoint(job_.run_dir, checkpoints_->resumed_path(), state)
                             : checkpoints_->started_from_origin();
  // A rollback goes back to the checkpoint read now, not to what a link given (checkpoints/best)
  // names by then.
  if (!given.empty()) line_start_ = checkpoints_->resumed_path();
  if (state.contains("skipped_batches") && state["skipped_batches"].is_array()) {
    for (const auto& x : state["skipped_batches"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0) {
        throw std::runtime_error("checkpoint state: skipped_batches: not a list of steps");
      }
      skipped_batches_.push_back(x.get<int64_t>());
    }
  }
  return next_step_;
}

void Trainer::begin_line() {
  // A given checkpoint starts a line of its own: the run's newer ones go once every rank has
  // restored and passed the checks of resume() (drop_newer_checkpoints meets them first).
  if (!checkpoints_ || checkpoints_->started_from().empty()) return;
  // A restart before the line's first save resumes from its start as the run's own checkpoint
  // (worker/checkpoint_line.h): this says which line that is. Written before that meeting: a
  // rank that fails its restore meanwhile leaves the old line whole, whose newest line.json does
  // not name, so nothing misreads it.
  if (comm_.rank() == 0) record_line_start(job_.run_dir, line_from_);
  checkpoints_->drop_newer_checkpoints(next_step_);
}

void Trainer::wait_for_checkpoints() {
  if (checkpoints_) checkpoints_->wait();
}

int64_t Trainer::batch_index(int64_t step) const {
  int64_t shift = 0;
  for (int64_t from : skipped_batches_) shift += from <= step ? 1 : 0;
  return step + shift;
}

void Trainer::check_validation_data(const nlohmann::json& state) const {
  // Recorded since 2026-12-04; a job without validation data now has none to compare (a job
  // whose validation split changed is another job: base/run_dir.h).
  const auto windows = state.find("val_windows");
  const auto recorded = state.find("val_fingerprint");
  if (!data_.val || windows == state.end() || !windows->is_number_unsigned() ||
      recorded == state.end() || !recorded->is_string()) {
    return;
  }
  const uint64_t was = windows->get<uint64_t>();
  const uint64_t was_fingerprint = std::strtoull(recorded->get<std::string>().c_str(), nullptr, 16);
  if (was == data_.val->num_windows() && was_fingerprint == data_.val->fingerprint()) return;
  const std::string what =
      "the validation data (data.val, or the last data.val_fraction of "
      "data.train) holds " +
      std::to_string(data_.val->num_windows()) +
      " windows of other tokens "
      "than the " +
      std::to_string(was) + " the checkpoint resumed from was evaluated on";
  if (job_.checkpoint.keep_best) {
    throw InputError(what +
                     ": validation losses do not compare across them, and "
                     "checkpoint.keep_best picks its best checkpoint by them; give the "
                     "same validation data, or set checkpoint.keep_best: false");
  }
  if (comm_.rank() == 0) {
    std::printf(
        "ringmaster: note: %s: validation losses from here on do not compare with "
        "earlier ones\n",
        what.c_str());
    std::fflush(stdout);
  }
}

nlohmann::json Trainer::data_state(int64_t steps_done) const {
  // For people and tools: a resume needs only steps_done and skipped_batches, everything else
  // (data position, schedule, random draws) being a function of them and the seed.
  const int64_t cursor = batch_index(steps_done) * job_.train.global_batch;
  const uint64_t per_epoch = data_.train->num_windows();
  nlohmann::json state = {
      {"global_sample_cursor", cursor},
      {"train_windows", per_epoch},
      {"train_fingerprint", fingerprint_hex(data_.train->fingerprint())},
      {"epoch", static_cast<uint64_t>(cursor) / per_epoch},
      {"sample_in_epoch", static_cast<uint64_t>(cursor) % per_epoch},
      {"next_lr", learning_rate(job_.optimizer, steps_done, job_.train.steps)},
      {"skipped_batches", skipped_batches_},
      // checkpoint.keep_best: what a resumed run must beat, and whether this is the best
      // (retention keeps, of the checkpoints marked so, the one of the lowest loss).
      {"best_val_loss", best_val_loss_},
      {"best_step", best_step_},
      {"best", best_step_ > 0 && best_step_ == steps_done}};
  // What validation losses are measured on: a resume checks it (check_validation_data).
  if (data_.val) {
    state["val_windows"] = data_.val->num_windows();
    state["val_fingerprint"] = fingerprint_hex(data_.val->fingerprint());
  }
  // Where the line this run trains on started (worker/checkpoint_line.h), if not at step 0.
  if (!line_from_.is_null()) state["line_from"] = line_from_;
  return state;
}

bool Trainer::is_new_best(int64_t step, double val_loss) {
  // Every rank must take the same decision (a save is collective): rank 0's loss decides.
  double v = val_loss;
  host_comm_.broadcast(&v, 1, DType::kFloat64, 0)->wait();
  if (!std::isfinite(v) || (best_step_ > 0 && !(v < best_val_loss_))) return false;
  best_val_loss_ = v;
  best_step_ = step;
  return true;
}

void Trainer::roll_back(const StepMetrics& bad) {
  const bool rank0 = comm_.rank() == 0;
  // Isolated spikes days apart each get their rollback; a step that stays bad however many
  // batches it skips ends the run.
  // Counted from the furthest bad step: two bad batches that send the run back and forth
  // between their steps (6, 7, 6, 7, ...) count as one troubled stretch, not as new steps.
  if (bad.step > last_bad_step_) {
    rollbacks_at_step_ = 0;
    last_bad_step_ = bad.step;
  }
  if (++rollbacks_at_step_ > kMaxRollbacks) {
    throw std::runtime_error("step " + std::to_string(bad.step) + ": non-finite loss or "
                             "gradient again after " + std::to_string(kMaxRollbacks) +
                             " rollbacks at this step (resilience.on_nan: rollback); giving up");
  }
  if (rank0) {
    if (options_.console != nullptr) options_.console->clear();
    std::printf("ringmaster: step %lld: non-finite %s; rolling back to the newest verified "
                "checkpoint (in memory or on disk), and step %lld will train on the next batch "
                "instead\n",
                static_cast<long long>(bad.step),
                std::isfinite(bad.loss) ? "gradient norm" : "loss",
                static_cast<long long>(bad.step));
    std::fflush(stdout);
    append_run_event(job_.run_dir, "nan_rollback",
                     {{"step", bad.step}, {"what", std::isfinite(bad.loss) ? "grad_norm" : "loss"}});
  }
  progress_.enter(Phase::kCheckpointWait);
  checkpoints_->wait();  // the newest save must be on disk before choosing
  progress_.enter(Phase::kCheckpointLoad);
  // From memory when every rank holds a step at least as new as the disk's: the rollback then
  // costs the bad step alone, not the steps since the last disk checkpoint. Every step held is
  // before the bad one (its update never ran), so it trained on the batches the skip keeps; only
  // its record of skipped batches lacks this skip, as a disk checkpoint's would, until the next
  // save writes the new list.
  if (memory_) {
    const MemoryCheckpoints::Agreed held = memory_->agree_on_step();
    const int64_t disk = newest_disk_step(job_.run_dir, host_comm_);
    if (held.step && *held.step >= disk && *held.step < bad.step) {
      // The slot's record of skipped batches is as old as the slot: the skips of rollbacks to
      // it or to older steps since are this run's to keep, as the disk rollback keeps them (the
      // slot's list alone made a second retry of one step take the first retry's batch again).
      std::vector<int64_t> skipped = skipped_batches_;
      if (resume_from_memory(*held.step, held.account, disk)) {
        skipped_batches_ = std::move(skipped);
        skipped_batches_.push_back(bad.step - 1);
        if (rank0 && options_.metrics) options_.metrics->rewind(next_step_);
        rebuild_spike_windows();
        return;
      }
      // Not restored (said): the disk's checkpoint below is restored over what memory wrote.
    }
    // Rolling back to disk: the segments go, as before memory was consulted, so that a restart
    // never prefers a slot some rank held past the disk's step, whose record lacks this skip.
    memory_->discard();
  }
  // A run that began with --from goes back to that checkpoint until it has saved one of its own
  // (Checkpointing::resume's line start): the run directory holds none of the line before that,
  // or only an older line's.
  const int64_t steps_done = checkpoints_->resume("", line_start_);
  if (steps_done == 0) {
    throw std::runtime_error("step " + std::to_string(bad.step) + ": non-finite loss or "
                             "gradient, and no checkpoint verifies to roll back to");
  }
  // From the bad step on, every step takes the batch after the one it would have taken. The
  // steps replayed before it take the same batches as the first time, so they repeat exactly.
  skipped_batches_.push_back(bad.step - 1);
  next_step_ = steps_done;
  if (rank0 && options_.metrics) options_.metrics->rewind(steps_done);
  rebuild_spike_windows();
}

void Trainer::rebuild_spike_windows() {
  loss_window_.clear();
  norm_window_.clear();
  const ResilienceConfig& rc = job_.resilience;
  if (rc.spike_loss_zscore <= 0 && rc.spike_norm_zscore <= 0) return;
  // The windows as the steps before next_step_ left them, from what they logged (a run that
  // resumes has every line up to its checkpoint's step): rank 0 reads, every rank gets the
  // same values, so every rank takes the same decisions as an uninterrupted run.
  std::string packed;
  if (comm_.rank() == 0) {
    const SpikeHistory h = read_spike_history(run_file(job_.run_dir, "metrics.jsonl"), next_step_);
    packed = pack_spike_history(h);
  }
  const SpikeHistory h = unpack_spike_history(broadcast_string(host_comm_, packed, 0));
  for (double v : h.losses) loss_window_.push(v);
  for (double v : h.norms) norm_window_.push(v);
}

Trainer::Outcome Trainer::run() {
  // The clock starts now: model set up, checkpoint (if any) read back.
  progress_.enter(Phase::kStart, next_step_ + 1);
  rebuild_spike_windows();
  const std::unique_ptr<Watchdog> watchdog = Watchdog::start(job_, progress_, comm_, &host_comm_);
  if (trace_) {
    // Time zero of every rank's trace: the exit of one barrier (trace_recorder.h, Clocks).
    host_comm_.barrier();
    trace_->align();
    // The attempt's name, the same in every rank's file: rank 0's start (ranks' clocks, even on
    // one host, format a millisecond apart). Milliseconds since the epoch fit a double exactly.
    double start_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    start_ms = std::floor(start_ms);
    host_comm_.broadcast(&start_ms, 1, DType::kFloat64, 0)->wait();
    trace_->set_attempt(std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double, std::milli>(start_ms))));
  }
  const Outcome outcome = run_steps();
  if (trace_) trace_->finish();
  return outcome;
}

Trainer::Outcome Trainer::run_steps() {
  const TrainConfig& tc = job_.train;
  const bool rank0 = comm_.rank() == 0;
  while (next_step_ < tc.steps) {
    const int64_t step = next_step_;
    StepMetrics m = train_step(step);
    if (m.rollback) {
      roll_back(m);
      continue;
    }
    const bool last = step + 1 == tc.steps;
    const bool stop = stop_requested_ && !last;
    bool new_best = false;
    if (data_.val && tc.eval_every > 0 && (m.step % tc.eval_every == 0 || last)) {
      m.val_loss = evaluate();
      new_best = job_.checkpoint.keep_best && is_new_best(m.step, *m.val_loss);
    }
    if (!data_.choices.empty() && tc.eval_every > 0 && (m.step % tc.eval_every == 0 || last)) {
      m.choice_accuracy = choice_accuracy();
    }
    // The step's metrics line before its checkpoint: once a checkpoint of step k is committed,
    // the line of step k is written, and a run resumed from k (which keeps lines 1..k) has
    // every step's line.
    if (rank0) {
      progress_.enter(Phase::kLog);
      if (options_.metrics) options_.metrics->write(m);
      if (m.skipped && m.spike.empty()) {  // a spike's event came with its decision
        append_run_event(job_.run_dir, "nan_skipped",
                         {{"step", m.step}, {"what", std::isfinite(m.loss) ? "grad_norm" : "loss"}});
      }
      if (stop) {
        append_run_event(job_.run_dir, "stop_signal",
                         {{"step", m.step},
                          {"signal", stop_signal_ != 0 ? signal_name(stop_signal_)
                                                       : std::string("(seen on another rank)")}});
      }
      const bool permanent = m.step % tc.log_every == 0 || m.step == 1 || last || stop ||
                             m.val_loss.has_value() || m.choice_accuracy.has_value();
      if (options_.console != nullptr) {
        options_.console->step(m, permanent);
      } else if (options_.verbose && permanent) {
        std::printf("%s\n", format_log_line(m, tc.steps).c_str());
        std::fflush(stdout);
      }
    }
    if (checkpoints_ && (last || stop || new_best ||
                         (job_.checkpoint.every > 0 && m.step % job_.checkpoint.every == 0))) {
      progress_.enter(Phase::kCheckpointSave);
      // ...and durable before it: a power cut must not keep checkpoint k and lose lines 1..k.
      if (rank0 && options_.metrics) options_.metrics->sync();
      checkpoints_->save(m.step, data_state(m.step));
    }
    // After the step's metrics line, as the disk checkpoint: a resume from step k has lines
    // 1..k. The disk save above may still be copying the same buffers; both only read them.
    if (memory_ && memory_->due(m.step)) {
      progress_.enter(Phase::kCheckpointSave);
      // With replicas a restart may resume from this step after rank 0's host is lost: its
      // metrics lines must not be lost with the host's page cache (a network file system keeps
      // only what was flushed). One fsync per memory save, beside a copy of the whole state.
      if (rank0 && options_.metrics && memory_->replicated()) options_.metrics->sync();
      memory_->save(m.step, skipped_batches_, data_.train->num_windows(),
                    data_.train->fingerprint());
    } else if (memory_) {
      memory_->poll();  // a replica received since the last save is committed now
    }
    if (stop) return Outcome::kStopped;
  }
  // A run restored at (or past) its last step trains none, so the end's save above never came:
  // restored from memory, the disk may be steps behind it, and a checkpoint of the end is what
  // extending the run (a larger train.steps) goes on from. Not when the disk holds it (nor the
  // metrics fsync that goes with a save: the power-cut tests find every fsync that is not needed).
  if (checkpoints_ && !checkpoints_->has_saved(next_step_)) {
    progress_.enter(Phase::kCheckpointSave);
    if (rank0 && options_.metrics) options_.metrics->sync();
    checkpoints_->save(next_step_, data_state(next_step_));
  }
  return Outcome::kFinished;
}

}  // namespace rm

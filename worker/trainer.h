// The step loop of one rank: micro-batches with gradient accumulation, gradient
// synchronisation and sharding (sharded_state.h), the learning-rate schedule, global-norm
// clipping, AdamW, periodic validation, metrics, and the NaN policy.
//
// Sample order: optimizer step s consumes global sample indices [s*G, (s+1)*G) with
// G = train.global_batch; micro-batch j of rank r takes the contiguous slice starting at
// s*G + (j*R + r)*micro_batch. The set of samples in a step is therefore the same for any
// number of ranks R, and resuming only needs the step number. (With resilience.on_nan: rollback,
// a step that produced a non-finite loss is retried after the rollback on the next batch, and
// every later step shifts by one batch too; the list of such steps is saved in checkpoints.)
//
// Every rank runs the same calls in the same order (they issue collectives); only rank 0
// prints and writes metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/communicator.h"
#include "configs/job_config.h"
#include "model/model.h"
#include "observe/console_progress.h"
#include "observe/metrics_log.h"
#include "observe/step_progress.h"
#include "observe/trace_recorder.h"
#include "worker/checkpointing.h"
#include "worker/evaluate.h"
#include "worker/memory_checkpoints.h"
#include "worker/outlier_window.h"
#include "worker/sharded_state.h"
#include "worker/step_graph.h"
#include "worker/training_data.h"

namespace rm {

struct TrainerOptions {
  bool verbose = true;            // print the log line to stdout (rank 0)
  MetricsLog* metrics = nullptr;  // optional metrics.jsonl sink (rank 0)
  // Rank 0's console (progress line and log lines); null: the log lines alone, if verbose.
  ConsoleProgress* console = nullptr;
  // Where the model computes; null: a cpu Compute of the model's own (the thread count as it
  // is). comm must communicate memory of this backend.
  Compute* compute = nullptr;
  // Reduces host scalars (loss, stop flag, gradient norm); null: comm. Needed when comm works
  // on device memory only (nccl).
  Communicator* host_comm = nullptr;
  // Each rank's host (MpiSession::host_of_rank); empty: one host. In-memory checkpoints keep a
  // replica of each rank's slice on another host when there are several.
  std::vector<int> host_of_rank = {};
};

// Time one step spent waiting for gradient communication after backward, for the benchmark.
struct StepTiming {
  double compute_ms = 0, comm_wait_ms = 0;
};

class Trainer {
 public:
  // Plans every buffer once; initialises parameters from job.seed. The communicator's size is
  // the number of data-parallel ranks.
  Trainer(const JobConfig& job, TrainingData& data, Communicator& comm,
          TrainerOptions options = {});
  // Not copied or moved: the sharded state and a watchdog hold pointers into it.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step (0-based index `step`); returns its metrics (val_loss not included).
  StepMetrics train_step(int64_t step);
  // Mean validation loss per target over train.eval_batches micro-batches of the first
  // validation windows (the same windows every time), split across ranks. Collective.
  double evaluate();
  // data.choices: the share of its examples the model picks right (evaluate.h's rule), the
  // examples split across ranks. Collective; the job must have data.choices.
  double choice_accuracy();
  // Runs steps [next_step(), train.steps), logging and evaluating as configured, and saving
  // checkpoints (every checkpoint.every steps and at the end) once enabled. A stop signal
  // (stop_signal.h) received by any rank ends the run after the step in progress, with a
  // checkpoint of that step when checkpoints are enabled: run() then returns kStopped and
  // stop_signal() names the signal (on the ranks that received one).
  // With resilience.step_timeout_s > 0, a watchdog (watchdog.h) watches this rank for as long as
  // run() runs: from after construction and resume to the last step's checkpoint save.
  enum class Outcome { kFinished, kStopped };
  Outcome run();
  int stop_signal() const { return stop_signal_; }

  // Where rank 0 writes one line per step; may be set (or changed) before run().
  void set_metrics(MetricsLog* metrics) { options_.metrics = metrics; }
  void set_console(ConsoleProgress* console) { options_.console = console; }

  // Writes checkpoints into job.run_dir/checkpoints/ from now on; resolved_job is recorded in
  // each manifest.
  void enable_checkpoints(const std::string& resolved_job);
  // Continues from `path` or (empty) the run's newest verified checkpoint, if any: parameters,
  // Adam moments and step; the data position and schedule follow from the step. Returns the
  // steps already done. Requires enable_checkpoints. With checkpoint.memory_every and an empty
  // path, the newest step every rank holds verified in memory (memory_checkpoints.h) is taken
  // instead when no disk checkpoint is newer; rank 0 says which, from where, and what it
  // passed over. line_start (with an empty path): the --from of a run that goes on from it
  // already (worker/checkpoint_line.h), started from again when no checkpoint of its line
  // verifies. Collective. A given checkpoint (path, or line_start taken) starts a line: call
  // begin_line() next.
  int64_t resume(const std::string& path, const std::string& line_start = "");
  // After resume() took a given checkpoint, and once the run's weights.bin of an earlier end is
  // gone (a crash between would leave that end newer than every checkpoint, a finished run a
  // restart refuses): rank 0 records the line in RUN_DIR/line.json, then the run's checkpoints
  // past it go (Checkpointing::drop_newer_checkpoints) -- in that order, so that a crash between
  // leaves the old line's newest, which line.json does not name, rather than the line's start
  // unnamed. No-op otherwise. Collective.
  void begin_line();
  // A run's first start with model.init_from: the parameters from there instead of the seed's
  // (worker/initial_weights.h), each rank reading its own part; rank 0 says what it read and
  // records it in events.jsonl ("initialized"). A source that fails to read ends the job: exit
  // 2 on one rank, else every rank at once (Communicator::abort). Collective.
  void load_initial_weights();
  // A run that starts anew, or has finished: removes this rank's in-memory checkpoint segment.
  void discard_memory_checkpoints();
  // Waits for the last checkpoint to be on disk.
  void wait_for_checkpoints();
  // Saves of this attempt that failed and were let pass (checkpoint.on_error: continue).
  int failed_checkpoint_saves() const;

  int64_t next_step() const { return next_step_; }
  Model& model() { return *model_; }
  ShardedState& state() { return *state_; }
  const JobConfig& job() const { return job_; }
  const StepTiming& last_timing() const { return timing_; }
  // Step graphs (on by default where they apply; RM_CUDA_GRAPH=0 turns them off: step_graph.h):
  // whether this job uses them, and how many steps so far ran as a replay of one (the step that
  // recorded it included).
  bool has_step_graphs() const { return graph_ != nullptr; }
  int64_t steps_replayed() const { return steps_replayed_; }
  // Where the step loop is (the watchdog reads it; so may tests).
  const StepProgress& progress() const { return progress_; }

 private:
  JobConfig job_;
  TrainingData& data_;
  Communicator& comm_;
  Communicator& host_comm_;
  TrainerOptions options_;
  int accum_steps_;
  std::unique_ptr<Model> model_;
  // data.choices: this rank's forward passes, and how many every rank runs (the busiest rank's
  // count; a ZeRO-3 forward is collective), the surplus ones a pass of example 0, not counted.
  std::vector<ChoicePass> choice_passes_;
  size_t choice_rounds_ = 0;
  ChoicePass choice_filler_;
  void plan_choices();  // the three above, from data_.choices
  // resilience.spike_*_zscore: the recent steps' losses and gradient norms, and their rebuild
  // from metrics.jsonl where the run (re)starts from step next_step_.
  OutlierWindow loss_window_, norm_window_;
  void rebuild_spike_windows();
  // observability.trace only. Declared before what records into it, so destroyed after: an
  // asynchronous save still running when a step throws (a NaN under on_nan: abort, bad input)
  // ends in ~Checkpointing, on the writer's thread, with trace->save_done().
  std::unique_ptr<TraceRecorder> trace_;
  std::unique_ptr<ShardedState> state_;
  std::unique_ptr<Checkpointing> checkpoints_;
  std::unique_ptr<MemoryCheckpoints> memory_;  // checkpoint.memory_every > 0
  std::vector<int> inputs_, targets_;
  std::unique_ptr<StepGraph> graph_;  // where step graphs apply (step_graph.h)
  bool record_graphs_ = true;         // false once a recording failed: eager from then on
  int64_t steps_run_ = 0;             // by this process
  int64_t steps_replayed_ = 0;        // of them, as a step graph
  int64_t next_step_ = 0;
  StepTiming timing_;
  StepProgress progress_;  // marked on every phase: cheap, watched or not
  // resilience.on_nan: rollback. Each entry x: from step x (0-based) on, every step takes the
  // batch after the one it took before (batch_index); saved in checkpoints.
  static constexpr int kMaxRollbacks = 3;  // at one step
  std::vector<int64_t> skipped_batches_;
  // checkpoint.keep_best: the lowest validation loss so far and its step (saved in checkpoints,
  // so a resumed run knows what to beat); 0 = none yet.
  double best_val_loss_ = 0;
  int64_t best_step_ = 0;
  // The checkpoint the line this run trains on started from, as checkpoint states record it
  // (worker/checkpoint_line.h); null when it started at step 0.
  nlohmann::json line_from_;
  // The checkpoint that began the line this attempt trains on (--from, or the line's start it
  // goes on from; "": the run's own), for a rollback before the line's first save of its own.
  std::string line_start_;
  int64_t last_bad_step_ = 0;
  int rollbacks_at_step_ = 0;
  int64_t batch_index(int64_t step) const;
  nlohmann::json data_state(int64_t steps_done) const;
  // checkpoint.keep_best: whether `val_loss` (rank 0's, broadcast) at `step` beats every earlier
  // evaluation; if so it becomes the best. Collective.
  bool is_new_best(int64_t step, double val_loss);
  // The best so far from a checkpoint's state (none: no best yet), or after a resume from memory
  // from the newest committed disk checkpoint's (collective).
  void restore_best(const nlohmann::json& state);
  void restore_best_from_disk();
  void roll_back(const StepMetrics& bad);
  // resume()'s in-memory branch: restores `step` from memory and reports it; returns it, or
  // nullopt on every rank where some rank could not restore it (MemoryRestoreError: said on
  // rank 0's console and in events.jsonl), for resume() to take the disk instead.
  [[nodiscard]] std::optional<int64_t> resume_from_memory(int64_t step, const std::string& account,
                                                          int64_t disk_step);
  // Throws InputError where the training data no longer holds the `windows` a checkpoint
  // (`kind`: "in-memory", or "" for one on disk) was trained on, or other tokens than its
  // `fingerprint` (TokenSource::fingerprint; 0: not recorded): the data order depends on them.
  void check_train_data(uint64_t windows, uint64_t fingerprint, const std::string& kind) const;
  // Where a disk checkpoint's manifest `state` records the validation data it was evaluated on
  // and it differs now: with checkpoint.keep_best, throws InputError (its best is chosen by those
  // losses); else rank 0 prints a note. In-memory checkpoints do not record it.
  void check_validation_data(const nlohmann::json& state) const;
  // Whether memory's agreed step may be resumed from without removing a finished run's end
  // (worker/finished_run.h: memory_keeps_finished_end), as rank 0 judges it, on every rank.
  bool memory_keeps_end(int64_t step);
  // resume()'s branch that took the disk although memory checkpoints are on: removes what
  // memory holds of the run on every host, of any layout (collective).
  void forget_memory_checkpoints();
  // After a shrunk restart (RM_SHRUNK_FROM_RANKS): the earlier layout's in-memory checkpoints,
  // if newer than the disk's, written to disk as that layout's checkpoint
  // (worker/memory_salvage.h), which resume() then reshards from.
  void salvage_shrunk_layout();
  Outcome run_steps();  // run()'s loop
  int stop_signal_ = 0;          // the stop signal this rank received (0: none)
  bool stop_requested_ = false;  // some rank received one (agreed in the loss all-reduce)
};

}  // namespace rm

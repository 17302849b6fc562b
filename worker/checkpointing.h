// Saving and resuming a training run through checkpoint/: every rank writes its own slice of
// the parameters and Adam moments (asynchronously when checkpoint.async), rank 0 commits the
// manifest with the job and the state exact continuation needs (the next step; the data cursor,
// schedule position and RNG counters are all functions of it and of the seed), and resume reads
// each rank's new slice from the newest checkpoint that verifies, written by any number of
// ranks in any shard mode.
//
// Collective: every rank makes the same calls in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/async_writer.h"
#include "collectives/communicator.h"
#include "configs/job_config.h"
#include "model/model.h"
#include "worker/sharded_state.h"

namespace rm {

class TraceRecorder;

// Throws CheckpointError unless the manifest's tensor table and "params" buffer are exactly
// `model`'s layout (names, shapes, offsets, size): the bytes of another model mean nothing.
void check_checkpoint_matches_model(const Manifest& manifest, const Model& model,
                                    const std::string& ckpt_dir);

class Checkpointing {
 public:
  Checkpointing(const JobConfig& job, const std::string& resolved_job, const Model& model,
                ShardedState& state, Communicator& comm);
  ~Checkpointing();

  // Saves the state after `steps_done` optimizer steps (a no-op if that step is already saved).
  // `extra_state` (a JSON object) is merged into the manifest's state, overriding defaults.
  void save(int64_t steps_done, const nlohmann::json& extra_state = nlohmann::json::object());
  // Waits until the last save is on disk (rank 0: committed). save() and wait() throw a failed
  // save's error on one rank; with several, they abort the job with it (see or_abort). Under
  // checkpoint.on_error: continue, an I/O error (IoError) is instead reported on stderr and in
  // events.jsonl ("checkpoint_failed") and training goes on; the next save tries again.
  void wait();
  // Saves that failed and were tolerated (on_error: continue).
  int failed_saves() const { return failed_saves_; }
  // The state of `steps_done` is on disk already (a resume from memory of the disk's newest
  // step): save() of it is a no-op.
  void note_saved(int64_t steps_done) { last_saved_ = steps_done; }
  // Whether the last save (or resume, or note_saved) was of `steps_done`: save() of it is a no-op.
  bool has_saved(int64_t steps_done) const { return last_saved_ == steps_done; }
  // Waits until the last save no longer reads the training buffers: call before modifying
  // parameters or optimizer moments (the optimizer update).
  void wait_staged();
  // Milliseconds the caller spent blocked in save() and wait_staged() since the last call.
  double take_blocked_ms();
  // Restores from `path`, or (empty path) from the newest verified checkpoint of the run, if
  // any. Returns the number of steps done (0: nothing to resume). Rank 0 prints what it used and
  // what it skipped. Throws InputError on every rank for a finished run (weights.bin) none of
  // whose checkpoints verifies, or whose end's checkpoint does not (weights.bin is then the
  // only copy of that end, and going on would replace it with another).
  // line_start (with an empty path): the checkpoint the run's line was started from
  // (worker/checkpoint_line.h), taken when the newest checkpoint that verifies does not go on
  // from it.
  int64_t resume(const std::string& path, const std::string& line_start = "");
  // The given checkpoint (path or line_start) the last resume() restored; empty when it was
  // the run's own or there was none.
  const std::string& started_from() const { return started_from_; }
  // That checkpoint's line origin (worker/checkpoint_line.h: checkpoint_line_origin), read
  // while it was pinned: what was restored, not what the path names by now. Null when none.
  const nlohmann::json& started_from_origin() const { return started_from_origin_; }
  // The checkpoint directory the last resume() restored ("" if none).
  const std::string& resumed_path() const { return resumed_path_; }
  // After a resume --from the checkpoint of `step` has succeeded on every rank (collective: it
  // meets them first): rank 0 removes the run's committed checkpoints past that step, saying
  // which -- the run goes on from there, on a line of its own. Before the first save.
  void drop_newer_checkpoints(int64_t step);
  // Rank 0: commits step_N whose shard files -- written by `world_size` ranks of another
  // layout, with write_shard() -- are `files`, with the manifest save() would write; records
  // checkpoint_saved. Throws CheckpointError (IoError) when the commit fails. (The in-memory
  // checkpoints of an earlier rank count, worker/memory_salvage.h.)
  void commit_written(int64_t steps_done, int64_t optimizer_steps, int world_size,
                      const nlohmann::json& extra_state, const std::vector<ShardFileInfo>& files);
  // The manifest state of the checkpoint the last resume() read (empty object if none).
  const nlohmann::json& resumed_state() const { return resumed_state_; }
  // Saves from now on tell `trace` when they are done (the end of their last stage); null: none.
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

 private:
  // The manifest of a save of `steps_done` by `world_size` ranks, without its files.
  Manifest manifest_of(int64_t steps_done, int64_t optimizer_steps, int world_size,
                       const nlohmann::json& extra_state) const;
  // Runs body; with several ranks, a failure (a full disk on this rank) ends the whole job at
  // once with the error (Communicator::abort): the other ranks may already wait for this one
  // in a collective, and unwinding -- whose destructors meet the peers -- would end in a timeout
  // that hides the cause. One rank: the error propagates (exit 1).
  void or_abort(const std::function<void()>& body);
  // How long rank 0 may wait for a reader of a checkpoint it removes (a --from resume's drop, the
  // last save's retention) while the other ranks wait for it in a collective: a quarter of the
  // shorter of parallel.timeout_s and resilience.step_timeout_s, at most 30 s.
  // A stop signal cuts it short.
  ReaderWait reader_wait() const;
  // resume()'s broadcast step for a finished run without a checkpoint that verifies.
  static constexpr double kFinishedWithoutCheckpoint = -2;
  // ...and for a finished run whose newest checkpoint that verifies is older than its end.
  static constexpr double kEndNewerThanCheckpoints = -3;
  // ...and for a --from line that ended (weights.bin) with none of its checkpoints verifying.
  static constexpr double kLineEndWithoutCheckpoint = -4;
  // Whether the run directory holds a finished run's weights.bin that starting again from
  // line_start (a --from checkpoint, before the end) would remove.
  bool line_start_before_finished_end(const std::string& line_start) const;
  // Rank 0, resuming from a --from checkpoint: prints the keys its job trained with that differ
  // from this job's, if any.
  void say_how_the_job_differs(const std::string& given) const;
  // Runs body; under on_error: continue, an IoError is reported and swallowed (returns false).
  bool tolerate_io_error(const std::function<void()>& body);

  const JobConfig& job_;
  std::string resolved_job_;
  const Model& model_;
  ShardedState& state_;
  Communicator& comm_;
  AsyncCheckpointWriter writer_;
  int64_t last_saved_ = -1;
  double blocked_ms_ = 0;
  bool staging_ = false;  // a save may still read the training buffers
  int failed_saves_ = 0;
  nlohmann::json resumed_state_ = nlohmann::json::object();
  std::string started_from_;
  nlohmann::json started_from_origin_;
  std::string resumed_path_;
  TraceRecorder* trace_ = nullptr;
};

}  // namespace rm

// Saving a rank's shard of a checkpoint without stopping training.
//
// AsyncCheckpointWriter owns one background thread and one staging buffer. save() hands the
// caller's slices to the thread and returns at once; the thread copies them into the staging
// buffer (memcpy speed), signals that they are staged, then does the slow part: write + fsync
// the shard (checkpoint_writer.h) and, on the rank that commits, wait for every rank's shard,
// commit the checkpoint and apply retention.
//
//   - The caller's memory is read until wait_staged() returns: call it before modifying the
//     saved buffers. A trainer saves after step k and calls wait_staged() just before the
//     optimizer update of step k+1, so the copy overlaps that step's forward and backward and
//     the stall is only what the copy takes beyond them (usually nothing).
//
//   - One save in flight: the next save() (or wait()) first waits for the previous one, so the
//     staging buffer is reused. It is allocated on first use (or by reserve()) and only grows.
//   - A save that fails on I/O (a full disk) removes what it wrote -- the committing rank the
//     whole step_N.tmp/, and the scratch of earlier steps, which can no longer commit -- so older
//     checkpoints stay and the space comes back; its IoError ends with the bytes the shard needed
//     and the bytes free.
//   - Errors: a failure on the thread is rethrown (as thrown: CheckpointError) by the next
//     save() or wait(), once. The destructor waits for the save in flight; it cannot throw, so it
//     prints a failure of that last save to stderr -- call wait() before destruction to see it.
//   - Mode::kSync: the same API and results, the write done inline inside save(), straight from
//     the caller's memory (no staging copy); errors are thrown by save() itself.
//
// Multi-rank: no collective is needed, which matters because a Communicator may only be used by
// its owning thread. Every rank calls save() for the same step with its own slices; the rank
// with commit=true (rank 0) waits on its thread for the others' shard descriptors to appear in
// step_N.tmp/ (collect_shards), then commits. Before the first save of a job, rank 0 must call
// remove_incomplete_checkpoints() and all ranks must pass a barrier (so no rank writes into a
// stale step_N.tmp/ left by a crashed run). Steps must differ from one save to the next: a
// second save of the step just saved (a signal checkpoint right after the periodic one) could
// write into step_N.tmp/ before rank 0 has committed the first -- skip it instead. To be sure a
// checkpoint is committed (before exit, on a preemption signal), call wait() on rank 0.
//
// Thread-safety: one thread calls save()/wait()/reserve(); the class synchronises with its own
// background thread internally.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/manifest.h"
#include "checkpoint/retention.h"  // ReaderWait

namespace rm {

struct SaveResult;

struct SaveRequest {
  std::string run_dir;
  int64_t step = 0;
  int rank = 0;
  std::vector<ShardSlice> slices;  // caller's memory; read until wait_staged() returns
  // If set, called once before the slices are first read -- on the writer's thread in kAsync
  // mode, inside save() in kSync -- and returns when their data is there (a device download
  // into pinned memory may still be in flight when save() is called, so that the caller's
  // thread goes on queueing compute). It may throw; the save then fails without writing.
  std::function<void()> ready;

  // The committing rank only: once the shards of ranks 0..writers-1 are on disk (waiting up to
  // collect_timeout_s for them), commit `manifest` (everything but files, which are collected
  // from the shard descriptors; its step must be `step`), then apply retention if keep > 0.
  bool commit = false;
  int writers = 1;
  Manifest manifest;
  double collect_timeout_s = 600;
  int keep = 0;
  int64_t keep_every = 0;
  bool keep_best = false;
  // How long retention waits for the readers of checkpoints it would remove (a run's last save).
  ReaderWait retention_waits_for_readers;
  // If set, called after the save succeeded (and committed, on the committing rank), on the
  // thread that wrote it, with its result: a run's "checkpoint_saved" event. Must not throw.
  std::function<void(const SaveResult&)> on_saved;
};

struct SaveResult {
  int64_t step = -1;                 // -1: nothing saved yet
  ShardFileInfo shard;               // this rank's shard
  std::string committed_path;        // set when this rank committed
  uint64_t committed_bytes = 0;      // the committed checkpoint's shard bytes, all ranks' (ditto)
  std::vector<std::string> removed;  // by retention
  std::string retention_error;       // why retention failed, when it did (the save did not)
  double seconds = 0;                // spent writing (and committing), excluding the copy
};

class AsyncCheckpointWriter {
 public:
  enum class Mode { kAsync, kSync };
  explicit AsyncCheckpointWriter(Mode mode = Mode::kAsync);
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Grows the staging buffer to `floats` now (allocation and first touch cost ~1 s per 2 GiB:
  // do it at start-up rather than at the first save). No effect in kSync mode.
  void reserve(size_t floats);
  // Waits for the previous save (rethrowing its error), then starts this one and returns (kSync:
  // returns when it is done).
  void save(const SaveRequest& request);
  // Waits until the save in flight no longer reads the caller's memory (its slices are copied
  // into the staging buffer); returns at once if there is none, and in kSync mode. Never throws:
  // failures (of `ready`, of the write) surface from the next save() or wait().
  void wait_staged();
  // Waits for the save in flight, rethrows its error, returns the last save's result.
  SaveResult wait();
  // True when no save is in flight (non-blocking).
  bool idle() const;
  Mode mode() const { return mode_; }

 private:
  // Writes (and commits) a save; on an I/O failure removes what it wrote and throws IoError with
  // the bytes it needed and the bytes free.
  static SaveResult run(const SaveRequest& request);
  static SaveResult write_and_commit(const SaveRequest& request);
  void thread_main();
  void stage_job();  // on the thread: copies job_'s slices into staging_ and repoints them
  void grow(size_t floats);  // only while no job is in flight
  void wait_idle_and_rethrow(std::unique_lock<std::mutex>& lock);

  const Mode mode_;
  std::unique_ptr<float[]> staging_;
  size_t staging_floats_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool has_job_ = false;  // a job is queued or running
  bool staged_ = true;    // the job in flight has copied the caller's slices (or there is none)
  bool stop_ = false;
  SaveRequest job_;
  SaveResult result_;
  std::exception_ptr error_;
  std::thread thread_;  // last: started after everything it uses
};

}  // namespace rm

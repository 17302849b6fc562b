// Measurements for `ringmaster bench ckpt`: the checkpoint writer and reader against plain
// write(2)+fsync and pread(2) of the same bytes. Every function works on real files, times only
// the I/O it names (the source and destination memory is allocated and touched before the
// clock starts) and leaves behind only what it says it does. Blocking, single-threaded (apart
// from the AsyncCheckpointWriter threads); throws CheckpointError (IoError naming the path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/async_writer.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/manifest.h"

namespace rm {

// What a trainer checkpoints: three buffers of `count` floats, "params", "adam_m" and
// "adam_v", filled with a pattern that differs per buffer and element (not compressible into
// a repeating block, always finite) so that a read-back can be checked element by element.
class BenchState {
 public:
  explicit BenchState(uint64_t count);  // allocates, fills (touches) every page

  uint64_t count() const { return count_; }
  uint64_t bytes() const { return 3 * count_ * sizeof(float); }
  float* buffer(const std::string& name);  // throws CheckpointError for an unknown name

  // Rank `rank` of `ranks`: elements [count*rank/ranks, count*(rank+1)/ranks) of each buffer,
  // in the order ShardedState::checkpoint_view gives them (params, adam_m, adam_v).
  std::vector<ShardSlice> slices(int rank, int ranks) const;
  uint64_t shard_floats(int rank, int ranks) const;
  // The manifest the committing rank passes (everything but `files`).
  Manifest manifest(int64_t step, int ranks) const;
  // Throws CheckpointError naming the first element that differs from the pattern.
  void check(const std::string& what) const;
  // Overwrites every element of the three buffers with NaN bits (0xFF bytes), so that check()
  // after a read proves the read wrote every element, not only that it wrote nothing wrong.
  void scramble();

 private:
  uint64_t count_;
  std::unique_ptr<float[]> data_[3];
};

// Seconds to create `path`, write the three buffers to it back to back with 8 MiB
// write(2) calls as write_shard, fsync it, close it and fsync its directory. The file is
// deleted afterwards (untimed).
double bench_write_fsync(const std::string& path, const BenchState& state);

// Seconds for a whole checkpoint save of `state` split over `ranks` shard files written one
// after another (prepare_checkpoint_dir, write_shard for each rank, commit_checkpoint), as one
// process acting as every rank in turn. Leaves the committed RUN_DIR/checkpoints/step_N;
// returns its path in *ckpt_dir.
double bench_checkpoint_save(const std::string& run_dir, const BenchState& state, int ranks,
                             int64_t step, std::string* ckpt_dir);

// One AsyncCheckpointWriter per rank, as every rank of a job owns one. Writers of kAsync mode
// get reserve() for their shard now, as the trainer does at start-up (worker/checkpointing.cc).
std::vector<std::unique_ptr<AsyncCheckpointWriter>> make_bench_writers(
    AsyncCheckpointWriter::Mode mode, const BenchState& state, int ranks);

struct WriterSaveTimes {
  double blocked = 0;  // save() of every rank, one after another: the caller's stall
  double staged = 0;   // from the first save() until every wait_staged() has returned: the
                       // stall of a caller that modifies its buffers at once (kAsync: the copy)
  double done = 0;     // from the first save() until every wait() has returned (committed)
};
// Saves `state` as step `step` under run_dir through writers[r] for every rank, as the trainer
// builds its SaveRequests: the rank's slices of the three buffers; rank 0 commits (collecting
// the other shards' descriptors) with the manifest, then applies retention (keep 2). Ranks are
// saved last to first, so that in kSync mode rank 0, which waits for every shard, comes after
// them. Rank 0 gives up waiting for the others' shards after collect_timeout_s (so that a rank
// whose write failed does not hold the benchmark for the trainer's 600 s). Leaves the
// checkpoint.
WriterSaveTimes bench_writer_save(std::vector<std::unique_ptr<AsyncCheckpointWriter>>& writers,
                                  const std::string& run_dir, const BenchState& state, int64_t step,
                                  double collect_timeout_s);

// Drops the file's pages from the page cache (posix_fadvise POSIX_FADV_DONTNEED; the file must
// be clean, i.e. fsynced) and returns the fraction of its pages still resident (mincore).
double drop_from_page_cache(const std::string& path);

// Seconds to read every shard file of the checkpoint at ckpt_dir with plain pread(2) calls of
// up to 8 MiB straight into `into`'s buffers at the places the manifest (given, parsed before
// the clock) says: the same bytes into the same memory as a restore, without the checks.
double bench_read_plain(const std::string& ckpt_dir, const Manifest& manifest, BenchState& into);

// Seconds for a restore: CheckpointReader(ckpt_dir) (loads and validates the manifest), then
// read_range of each whole buffer into `into` (every piece's XXH64 checked as it is read).
double bench_restore(const std::string& ckpt_dir, BenchState& into);

// Seconds for `readers` threads, as many ranks, to verify the checkpoint at ckpt_dir together,
// each its share (VerifyShare: verify_checkpoint at kChecksums with part r of `readers`), as a
// resume verifies its choice (worker/shared_verification.h); 1 reader: the whole checkpoint, as
// rank 0 alone did before. Throws CheckpointError if any share does not verify.
double bench_verify(const std::string& ckpt_dir, int readers);

}  // namespace rm

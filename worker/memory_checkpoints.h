// checkpoint.memory_every (issue 22; this slice: each rank's own host). Every N steps, after the
// optimizer update, each rank copies what a disk checkpoint keeps of it -- its slice of the
// parameters and Adam moments (ShardedState::own_slices: 1/R of the state under every mode),
// the optimizer's step count and the batches skipped by NaN rollbacks -- into its shared-memory
// segment (checkpoint/memory_snapshot.h: two slots, XXH64, committed atomically). A restart of
// the same run on the same ranks and shard mode resumes from the newest step that every rank
// holds verified, when it is newer than the newest disk checkpoint: each rank restores its
// slice and the ranks gather the rest; the data position and random draws follow from the
// step, as for a disk resume.
//
// Which segment: rank r's is named from the run directory's absolute path; its owner key hashes
// that path with the rank, the rank count, the shard mode and the state's size, so that a
// segment of another run directory, rank layout or model is never read. A run that starts anew
// (nothing in its directory, or --fresh) discards its rank's segment first, so an earlier run's
// state in a directory that was removed and made again is never restored; a finished run
// removes it.
//
// Collective over host_comm: every rank makes the same calls in the same order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/memory_snapshot.h"
#include "collectives/communicator.h"
#include "configs/job_config.h"
#include "kernels/compute.h"
#include "worker/sharded_state.h"

namespace rm {

class MemoryCheckpoints {
 public:
  MemoryCheckpoints(const JobConfig& job, ShardedState& state, Compute& compute,
                    Communicator& host_comm);

  bool enabled() const { return job_.checkpoint.memory_every > 0; }
  // Whether the state after `steps_done` steps is one to keep (a multiple of memory_every).
  bool due(int64_t steps_done) const {
    return enabled() && steps_done % job_.checkpoint.memory_every == 0;
  }
  // Saves the state after `steps_done` steps (call after its optimizer update). Synchronous,
  // so that a crash in the next step loses that step only: a copy on a helper thread would
  // overlap the next step, and a crash in it would lose both. On a device, the slices are
  // downloaded first. Not collective.
  void save(int64_t steps_done, const std::vector<int64_t>& skipped_batches);
  // What the ranks hold, agreed: the newest step every rank holds verified (nullopt: none),
  // and, for rank 0 to print, a line that says which steps each rank holds and which slots it
  // skipped and why. Collective. Reads every byte of every slot.
  struct Agreed {
    std::optional<int64_t> step;
    std::string account;
  };
  Agreed agree_on_step();
  // Restores the state after `step` (agreed), verifying every byte; returns the batches
  // skipped by rollbacks up to it. Collective: throws std::runtime_error on every rank,
  // naming the ranks that failed, if any rank could not restore it.
  std::vector<int64_t> restore(int64_t step);
  // Removes this rank's segment (a new run, a finished run). Not collective.
  void discard();

 private:
  size_t capacity() const;
  std::vector<SnapshotPart> host_parts();  // the state's pieces in host memory

  const JobConfig& job_;
  ShardedState& state_;
  Compute& compute_;
  Communicator& comm_;
  std::string name_;
  uint64_t owner_ = 0;
  size_t floats_ = 0;  // own_slices() added up, fixed for the run
  std::optional<MemorySnapshot> snapshot_;  // opened at the first save or agreement
  std::vector<float> staging_;             // device backends: the state on its way
  std::vector<int64_t> meta_;              // steps, optimizer steps, skipped batches
};

}  // namespace rm

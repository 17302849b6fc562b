// checkpoint.memory_every (issue 22; this slice: each rank's own host). Every N steps, after the
// optimizer update, each rank copies what a disk checkpoint keeps of it -- its slice of the
// parameters and Adam moments (ShardedState::own_slices: 1/R of the state under every mode),
// the optimizer's step count and the batches skipped by NaN rollbacks -- into its shared-memory
// segment (checkpoint/memory_snapshot.h: two slots, XXH3 checksums, committed atomically). A restart of
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
// Replicas (several hosts with the same number of ranks each): after each save, a rank sends the
// slot it just committed, as it is, to its keeper on the next host (worker/replica_ring.h),
// which receives it into a segment of the same layout, "<its own name>-replica", and commits it
// with the sender's step, size and checksum. The transfer runs in the background over
// host_comm's point-to-point messages while the next steps train, and is completed -- and the
// received slot committed -- as soon as poll() sees it complete, and at the latest at the next
// save, before it writes (it writes the other slot; the one after would write over the slot that
// was sent). So a lost host costs at most N + 1 steps (memory_every N): the ones since the last
// save, and the one in which that save's replica was in flight. A restore takes a rank's
// slot from its keeper when its own segment lacks the agreed step (the host was lost, or the
// slot is damaged); every replica byte is verified against the sender's checksum before it is
// counted, and again when restored, so a damaged replica is never used.
//
// Collective over host_comm: every rank makes the same calls in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/memory_snapshot.h"
#include "collectives/communicator.h"
#include "configs/job_config.h"
#include "kernels/compute.h"
#include "worker/replica_ring.h"
#include "worker/sharded_state.h"

namespace rm {

// The words of a slot's meta part, before the slices: steps done, optimizer steps, the number
// of skipped batches, then those; the last two words, the training data's fingerprint and how
// many training windows it held.
inline constexpr size_t kMemoryMetaWords = 8192;
inline constexpr size_t kMemoryMaxSkipped = kMemoryMetaWords - 5;  // words 3 .. 3 + this - 1
// 0 in either: not recorded (a segment of a build before them).
inline constexpr size_t kMemoryTrainFingerprintWord = kMemoryMetaWords - 2;
inline constexpr size_t kMemoryTrainWindowsWord = kMemoryMetaWords - 1;

// Rank `rank`'s segment in a layout of slice_counts.size() ranks under `shard` (see above), or
// the replica of it that its keeper holds: its name, its owner key and its capacity in bytes
// (the meta part, then the rank's three slices).
struct MemorySegmentId {
  std::string name;
  uint64_t owner = 0;
  size_t capacity = 0;
  std::string home;  // the run directory, absolute: once it is gone, the segment is an orphan
};
MemorySegmentId memory_segment_id(const std::string& run_dir, ShardMode shard,
                                  const std::vector<size_t>& slice_counts, int rank, bool replica);

// The steps `snap` holds verified, newest commit first, into out[0] and out[1] (-1: none); each
// slot passed over for a reason other than "never written" is added to *skipped as
// "; <what>slot N skipped: <why>". Reads every byte of both slots.
void held_steps(const MemorySnapshot& snap, double* out, const std::string& what,
                std::string* skipped);

// Removes this host's segments of runs whose directory is gone (a run that crashed and was never
// run again; MemorySnapshot::remove_orphans) and returns a line saying which, "" when none. One
// rank a host calls it at start, whether or not its job keeps checkpoints in memory.
std::string remove_orphaned_memory_checkpoints();

// Removes this host's segments of the run in `run_dir`, of any rank layout (own segments and
// replicas), and returns a line saying how many ("removed N in-memory checkpoint segments of
// this run's earlier attempts from /dev/shm"; the caller says why), "" when none. For a run that
// keeps none in this attempt, or has started anew or ended: one rank a host calls it, no rank of
// the run using a segment at the time.
std::string remove_run_memory_checkpoints(const std::string& run_dir);

// MemoryCheckpoints::restore()'s failure, thrown on every rank alike once they have agreed that
// some rank could not restore the step.
class MemoryRestoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MemoryCheckpoints {
 public:
  // host_of_rank: each rank's host (TrainerOptions::host_of_rank); empty: one host.
  MemoryCheckpoints(const JobConfig& job, ShardedState& state, Compute& compute,
                    Communicator& host_comm, const std::vector<int>& host_of_rank);
  ~MemoryCheckpoints();
  MemoryCheckpoints(const MemoryCheckpoints&) = delete;
  MemoryCheckpoints& operator=(const MemoryCheckpoints&) = delete;

  // Whether replicas are kept on other hosts; if not, why (for the start-up line).
  bool replicated() const { return ring_.on(); }
  const std::string& why_not_replicated() const { return ring_.why_none; }

  bool enabled() const { return job_.checkpoint.memory_every > 0; }
  // Whether the state after `steps_done` steps is one to keep (a multiple of memory_every).
  bool due(int64_t steps_done) const {
    return enabled() && steps_done % job_.checkpoint.memory_every == 0;
  }
  // Saves the state after `steps_done` steps (call after its optimizer update). Synchronous,
  // so that a crash in the next step loses that step only: a copy on a helper thread would
  // overlap the next step, and a crash in it would lose both. On a device, the slices are
  // downloaded first. With replicas, first completes the previous save's exchange, then starts
  // this one's: every rank calls it at the same steps.
  // `train_windows`, `train_fingerprint`: how many training windows the data holds and its
  // tokens' fingerprint (recorded for the resume's check that the data did not change, as a
  // disk checkpoint's state records them).
  void save(int64_t steps_done, const std::vector<int64_t>& skipped_batches, uint64_t train_windows,
            uint64_t train_fingerprint);
  // Commits the replica received in the background once its transfer has completed, instead of
  // at the next save: a host lost in between then costs N + 1 steps, not 2N. Call it after the
  // steps that do not save. Not collective; cheap (it tests the messages in flight).
  void poll();
  // What the ranks hold, agreed: the newest step every rank holds verified, itself or through
  // its keeper's replica (nullopt: none), and, for rank 0 to print, a line that says which
  // steps each rank holds, which come from replicas, and which slots rank 0 skipped and why.
  // Collective. Reads every byte of every slot and replica.
  struct Agreed {
    std::optional<int64_t> step;
    std::string account;
  };
  Agreed agree_on_step();
  // Restores the state after `step` (agreed by agree_on_step, just before), first fetching
  // the slot from its keeper where a rank's own segment lacks it, verifying every byte;
  // returns the batches skipped by rollbacks up to it and the training data recorded (0: a
  // segment of a build that did not record it). Collective: throws MemoryRestoreError on every
  // rank, naming the ranks that failed, if any rank could not restore it (its slot damaged
  // since the agreement, a replica that did not arrive whole): the state is then partly
  // overwritten, and the caller takes it from the disk instead.
  struct Restored {
    std::vector<int64_t> skipped_batches;
    uint64_t train_windows = 0;
    uint64_t train_fingerprint = 0;  // 0: not recorded
  };
  Restored restore(int64_t step);
  // Removes this rank's segment and the replica it keeps (a new run, a finished run), after
  // the exchange in flight. Every rank calls it at the same point.
  void discard();

 private:
  size_t capacity_of(int rank) const {  // the bytes of a rank's slot: meta and slices
    return memory_segment_id(job_.run_dir, job_.parallel.shard, state_.slice_counts(), rank,
                             false).capacity;
  }
  size_t capacity() const { return capacity_of(comm_.rank()); }
  std::vector<SnapshotPart> host_parts();  // the state's pieces in host memory
  void open_replica();
  // Sends or receives `bytes` at `data` to or from `peer` in messages MPI can count.
  void post_pieces(std::vector<std::unique_ptr<Work>>& works, bool send, char* data, size_t bytes,
                   int peer);
  // Sends `slot` (its record, then its bytes) to `to` and receives one from `from` into
  // `into` (begin_receive'd there), a peer of -1 meaning none; the works go to pending_.
  void start_exchange(const MemorySnapshot::SlotCopy* slot, int to, MemorySnapshot* into,
                      size_t into_bytes, int from);
  // Waits for the exchange in flight and commits what it received. Returns whether a slot was
  // received and committed.
  bool finish_exchange();

  const JobConfig& job_;
  ShardedState& state_;
  Compute& compute_;
  Communicator& comm_;
  std::string name_;
  uint64_t owner_ = 0;
  std::string home_;  // the run directory, absolute (MemorySegmentId::home)
  size_t floats_ = 0;  // own_slices() added up, fixed for the run
  std::optional<MemorySnapshot> snapshot_;  // opened at the first save or agreement
  std::vector<float> staging_;             // device backends: the state on its way
  std::vector<int64_t> meta_;              // steps, optimizer steps, skipped batches

  ReplicaRing ring_;
  int keeper_ = -1, kept_ = -1;  // who keeps this rank's replica; whose replica it keeps
  std::string replica_name_;
  uint64_t replica_owner_ = 0;
  std::optional<MemorySnapshot> replica_;  // the replica this rank keeps
  // The exchange in flight: the works, the records sent and received (step, bytes, checksum) and
  // the segment receiving.
  std::vector<std::unique_ptr<Work>> pending_;
  int64_t record_out_[3] = {0, 0, 0};
  int64_t record_in_[3] = {-1, 0, 0};
  MemorySnapshot* receiving_ = nullptr;
  size_t receiving_bytes_ = 0;
  std::vector<double> held_;  // the last agreement: per rank, 2 own steps and 2 replica steps
};

}  // namespace rm

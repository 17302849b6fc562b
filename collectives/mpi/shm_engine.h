// The shared-memory path of the mpi backend: all-reduce, reduce-scatter, all-gather and barrier
// among ranks that share one node, through one MPI-3 shared window allocated at creation.
//
// Why: Open MPI's large collectives allocate temporaries on every call, and fresh pages cost
// ~3 us per 4 KiB here (first touch ~1.5 GB/s against ~15 GB/s memcpy). This engine allocates
// its staging once and, without access to the callers' buffers, moves each byte as few times as
// it can: per pipeline step, every rank copies the pieces that other ranks will reduce into its
// staging slot, then reduces its own piece straight from the peers' slots (one read per peer, one
// write to its buffer and one to its slot), then copies the other ranks' reduced pieces out of
// their slots. A step covers slot_bytes / n of every rank's shard, so the staging stays in the
// shared L3 cache; two slots let a rank start the next step while slower peers still read the
// previous one.
//
// Registered buffers (allocate()): memory in further shared windows, which every rank maps.
// A task whose buffer lies in one skips the staging: after one synchronisation each rank reduces
// its shard straight from every rank's buffer and writes the result straight into every rank's
// buffer (all-gather: copies each peer's shard from the peer's buffer); a second one tells that
// all are done. That is one pass over the data instead of three.
//
// Synchronisation is one monotone counter per rank in the window ("phases completed"): every
// rank runs the same tasks, so a phase has the same number on every rank, and waiting means
// "every peer's counter has reached v". With its first phase of a task, a rank announces whether
// its buffer is registered (and where) and which task it runs (its number among all the tasks it
// started, barriers and empty ones included, its kind, dtype, op and shard counts); peers check
// that all agree before reading anything of each other's, so that a rank that issued another
// collective (a bug of ours, or of a caller) fails the job naming both instead of reducing the
// wrong bytes or overrunning a buffer. Nothing here blocks: advance() does what it can and returns;
// the communicator polls it, checks deadlines and reports who it waits for.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace rm::detail {

// MPI does not align a rank's part of a shared window (Open MPI's start 0x108 bytes into a
// page), so every part is over-allocated by a page and used from its first page boundary. All
// processes map a window page-aligned, so all compute the same boundary for a given part.
constexpr size_t kShmPage = 4096;
char* shm_page_align(char* p);

enum class ShmKind { kAllReduce, kReduceScatter, kAllGather, kBarrier };

struct ShmTask {
  ShmKind kind = ShmKind::kBarrier;
  char* buf = nullptr;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // what the engine reduces with
  std::vector<size_t> counts;    // elements of each rank's shard, in rank order (not for barrier)
  // What the caller asked for: announced and compared with the peers' instead of `op`. They
  // differ on the hierarchical path, which sums within a host and divides after the inter-host
  // step; a rank there that asked for a sum where its peers asked for the average must still be
  // caught, not leave its slice undivided.
  ReduceOp asked = ReduceOp::kSum;
};

class ShmEngine {
 public:
  // Collective over `comm`, whose ranks must all share this node. slot_bytes: staging per rank
  // per slot. Messages name rank r of `comm` as rank_base + r of world_size ranks (0: comm's
  // size): the hierarchical path runs an engine on each host's ranks, and its users know the
  // job's rank numbers, not the host's. Throws CollectiveError if MPI fails.
  ShmEngine(MPI_Comm comm, size_t slot_bytes, int rank_base = 0, int world_size = 0);
  // Frees the window (collective) unless the engine was poisoned.
  ~ShmEngine();
  ShmEngine(const ShmEngine&) = delete;
  ShmEngine& operator=(const ShmEngine&) = delete;

  // Collective: every rank calls it with the same size. Zero-filled (first-touched here) and
  // page-aligned; valid until the engine is destroyed. Throws CollectiveError if MPI fails.
  void* allocate(size_t bytes);

  bool idle() const { return stage_ == Stage::kIdle; }
  // Phases this rank has completed; it changes exactly when advance() got something done.
  uint64_t phase() const { return phase_; }
  // Begins a task; the engine must be idle. The task completes in later advance() calls.
  void start(ShmTask task);
  // Advances the current task as far as peers allow; returns true once it has completed.
  bool advance();

  // Sleeps until a peer the current task waits for publishes a phase, or for at most
  // `max_us` microseconds (futex on the peer's counter: a waiting rank leaves its core to the
  // peer or to other processes, and the peer's publish wakes it).
  void block(long max_us);

  // Whether a peer the current task waits for last ran on CPU `cpu`: then spinning there would
  // only delay it.
  bool waits_for_peer_on(int cpu) const;

  // For error messages: what the current task waits for, e.g. "rank 1 (step 2/5, reduce)".
  std::string waiting_for() const;
  // A peer the current task waits for, or -1 (cheap: for CommActivity's peer).
  int blocking_peer() const;
  // A peer that poisoned the window (failed), or -1.
  int failed_peer() const;
  // Why the current task cannot proceed (ranks disagree about registered buffers), or "".
  const std::string& error() const { return error_; }
  // Tells peers this rank has failed, so they stop waiting for it at once.
  void poison();
  // Communicator::share_liveness: any thread may call it (it touches only this rank's liveness
  // word and reads the peers'), until the engine is destroyed.
  uint64_t share_liveness(uint64_t beats);

 private:
  enum class Stage {
    kIdle,
    kSlotWait,
    kCopyIn,
    kReduce,
    kCopyOut,
    kBarrierWait,
    kDirect,      // registered: wait for every rank's arrival, then do all the work
    kDirectDone,  // registered: wait until no peer touches this rank's buffer any more
  };
  // One per rank at the start of its window segment. `phase` counts the phases this rank has
  // completed; `futex` mirrors its low 32 bits for futex waits (futexes are 32-bit); `waiters` is
  // set by a peer about to sleep on `futex`, so that publish() makes the wake-up system call only
  // when someone sleeps; `announce` says where a task's buffer is (registered or not) and what
  // the task is, written before the task's first publish. Two of them, by task parity: a rank
  // cannot start task k+2 before every peer has passed its first wait of task k+1, after which
  // nobody reads task k's.
  // The poison flag sits on its own cache line.
  struct Control {
    alignas(64) std::atomic<uint64_t> phase;
    std::atomic<uint32_t> futex;
    std::atomic<uint32_t> waiters;
    struct Announce {
      std::atomic<uint64_t> where;        // announcement(): 0 = not registered
      std::atomic<uint64_t> task;         // task_word(): number, kind, dtype, op
      std::atomic<uint64_t> total;        // elements over all shards
      std::atomic<uint64_t> counts_hash;  // of the shard counts, in rank order
    } announce[2];
    std::atomic<int32_t> cpu;  // where this rank last published (sched_getcpu)
    alignas(64) std::atomic<uint64_t> poisoned;
    // Written by this rank's watchdog thread (share_liveness), read by the peers' watchdogs: on
    // its own cache line, away from the words the collectives spin on.
    alignas(64) std::atomic<uint64_t> liveness;
  };
  struct Region {
    MPI_Win win = MPI_WIN_NULL;
    std::vector<char*> bases;   // every rank's part, mapped here
    std::vector<size_t> bytes;  // and its usable size
  };

  bool peers_reached(uint64_t phase);
  int first_behind(uint64_t phase) const;  // a peer below `phase`, or -1
  void publish();
  void begin_step();
  void finish_step();
  void copy_in();
  void reduce();
  void copy_out();
  // Rank s's piece of the current step: its byte offset in the user buffer and its length.
  size_t piece_begin(int s) const;
  size_t piece_bytes(int s) const;
  char* slot_of(int rank) const;
  // Registered path (shm_direct.cc).
  int find_region(const char* buf, size_t bytes, size_t* offset) const;  // -1: not registered
  uint64_t announcement() const;  // this task's buffer: 0 = not registered
  void announce(size_t total);    // this task's buffer and what it is, before its first publish
  bool check_announcements();     // false (and error_ set) if the ranks disagree
  // What a rank's announced task is, for a message: "all_reduce #5 (float, sum) of 1024".
  std::string describe_task(uint64_t task, uint64_t total) const;
  char* peer_buffer(int rank) const;
  void direct_work();

  // "rank N" for rank r of comm_, in the job's numbering (rank_base_).
  std::string rank_name(int r) const;

  MPI_Comm comm_;  // the communicator's (not owned)
  int rank_ = 0;
  int size_ = 1;
  int rank_base_ = 0;   // the job's number of this engine's rank 0
  int world_size_ = 1;  // the job's ranks
  MPI_Win win_ = MPI_WIN_NULL;
  bool poisoned_ = false;
  size_t slot_bytes_ = 0;          // staging per rank per slot
  size_t piece_cap_ = 0;           // bytes of one rank's piece per step (slot_bytes_ / size_)
  std::vector<Control*> control_;  // every rank's control block, mapped here
  std::vector<char*> slots_;       // every rank's two staging slots, mapped here

  ShmTask task_;
  Stage stage_ = Stage::kIdle;
  size_t esize_ = 4;
  std::vector<size_t> offsets_;  // byte offset of each rank's shard
  size_t step_ = 0;
  size_t nsteps_ = 0;
  uint64_t phase_ = 0;        // this rank's completed phases (mirrors its control block)
  uint64_t wait_phase_ = 0;   // the phase the current stage waits for
  uint64_t global_step_ = 0;  // picks the slot; continues across tasks
  static constexpr size_t kSlots = 2;
  uint64_t slot_free_at_[kSlots] = {};  // per slot: the phase after which peers stop reading it
  std::vector<const void*> srcs_;       // scratch for the reductions, sized once
  std::vector<void*> dsts_;
  std::vector<Region> regions_;       // registered buffers, in allocation order
  int region_ = -1;                   // the current task's region, or -1 (staged)
  size_t region_offset_ = 0;          // where the task's buffer starts in it
  std::vector<size_t> peer_offsets_;  // where each rank's buffer starts in its part of it
  uint64_t announced_tasks_ = 0;      // tasks that announced their buffer; picks the announce slot
  // Every task started, barriers and empty ones (no rank moves an element) too: the number each
  // announces. An empty task announces nothing, so a rank that issued one its peers did not is
  // caught at its next task, whose number is then ahead of theirs.
  uint64_t issued_tasks_ = 0;
  bool check_pending_ = false;        // peers' announcements for this task not yet checked
  std::string error_;
};

}  // namespace rm::detail

// The Communicator: collective operations over the ranks of a job, one interface for every
// backend (mpi/ on host buffers, nccl/ on device buffers).
//
// Contract, for every backend:
//  - Threading: one thread owns a communicator and makes every call on it (including
//    Work::test/wait and progress). Nothing runs in the background; an operation advances only
//    inside calls on its communicator (see "Progress" below). The exceptions are activity() and
//    share_liveness(), which any thread may call (a watchdog thread: worker/watchdog.h).
//  - Ordering: every rank issues the same operations, with the same counts, dtype, op and root,
//    in the same order. Each issued operation (barrier included) takes the next sequence number
//    (1, 2, ...), the same on every rank, so an error names the operation all ranks can find.
//  - Buffers: operations work in place on the caller's buffer, which the caller owns; it must
//    stay valid and untouched until the operation's Work completes. Host memory for mpi, device
//    memory for nccl. Buffers that are communicated every step should come from allocate(),
//    which makes the mpi backend up to several times faster (see allocate). Several operations
//    may be outstanding at once; they may complete in any order -- on one node the mpi backend's
//    reductions and gathers complete in issue order, but its broadcasts and point-to-point
//    operations (MPI requests) beside them may finish first, and across nodes anything goes:
//    a caller learns that an operation is done from its own Work, never from a later one's.
//  - Work handles must not outlive their communicator. Dropping a Work without waiting is
//    allowed; the operation still completes during later calls.
//  - Timeouts: an operation must complete within CommOptions::timeout_s of being issued
//    (barrier: of being called); on several hosts, a rank waiting in-host for a peer busy with
//    the inter-host step waits up to half of timeout_s longer (1-30 s), so that the peer names
//    the lost host first. Past it, or on any error from the transport, the communicator
//    prints "[rank r/n] op(seq=S, bytes=B, timeout=Ts) timed out after X s ..." (naming the
//    ranks it waits for when it knows them) to stderr, then aborts the whole job (MPI_Abort) so
//    that peers fail too instead of waiting. With abort_on_error=false (tests) it instead
//    poisons the communicator (peers on the same node see it at once), marks it broken and
//    throws CollectiveError; every later call on it throws too.
//  - Creation (the backends' make_* factories), allocate() and destruction are collective
//    over the given MPI communicator and blocking; destruction waits for outstanding operations.
//
// Progress (collectives_overlap_probe, Open MPI 4.1.4, 2 ranks on this 2-core machine, 64 MiB,
// all-reduce started before ~200 ms of compute and waited for after): Open MPI's non-blocking
// collectives (libnbc) make no progress unless the caller enters MPI. Without polling,
// MPI_Wait still took 107-186 ms afterwards -- longer than a blocking MPI_Allreduce (51-76 ms);
// with MPI_Test every ~1 ms the wait was 0, the work having run inside the MPI_Test calls
// (the compute phase grew by 40-55 ms). This communicator works the same way by design: every
// byte is moved by the caller's thread inside progress()/test()/wait() (there is no spare core
// to hide it on), so call progress() between layers of backward; with progress() every ~1 ms
// the final wait was 0 here too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rm {

// Element types. kBFloat16 is bfloat16 (rm::bf16, kernels/bf16.h: the bit layout of CUDA's
// __nv_bfloat16). Host backends reduce bf16 in float: the sum of the ranks' values in rank order,
// divided by size() for kAvg, rounded to bf16 once per element (round to nearest, ties to even),
// so every algorithm and every rank gives the same bits. fp32 and fp64 are summed in rank order
// too on one host and on the mpi backend's flat MPI path (the same bits on both); its
// hierarchical path sums each host's ranks in order, then the hosts in order. Every rank always
// gets the same bits. nccl reduces as NCCL does (its own order and rounding), which may differ
// from that in the last bits.
enum class DType { kFloat32, kFloat64, kBFloat16 };
enum class ReduceOp { kSum, kAvg };  // kAvg: the sum divided by size()

size_t dtype_size(DType dtype);           // 4, 8, 2
const char* dtype_name(DType dtype);      // "float", "double", "bfloat16" (as nccl-tests prints)
const char* reduce_op_name(ReduceOp op);  // "sum", "avg"

// What every backend records of an issued operation: what to name in messages, and when it
// times out.
struct OpStamp {
  uint64_t seq = 0;
  const char* name = "";
  size_t bytes = 0;
  std::chrono::steady_clock::time_point issued;
  std::chrono::steady_clock::time_point deadline;  // issued + timeout_s
};
OpStamp stamp_op(uint64_t seq, const char* name, size_t bytes, double timeout_s);

// What a communicator is doing, published by its owning thread for a watchdog thread to read at
// any time (worker/watchdog.h): the oldest operation issued and not yet completed, whether the
// owner is blocked waiting for operations (Work::wait, barrier), the rank it waits for when the
// backend knows, and a counter that moves whenever an operation advances (a completion, a phase
// of the shared-memory engine) -- never while a rank waits for a peer that does nothing.
//
// Cost: the owner writes a few relaxed atomics when the oldest operation changes, when it starts
// and stops blocking, and per advance that moved; never per byte, never a lock. The operation's
// fields form a seqlock, so snapshot() returns one operation's fields, not a mix of two.
class CommActivity {
 public:
  struct Snapshot {
    uint64_t seq = 0;  // 0: no operation in flight
    const char* name = "";
    uint64_t bytes = 0;
    std::chrono::steady_clock::time_point issued;
    bool blocked = false;  // the owning thread is waiting for operations to complete
    int peer = -1;         // a rank the owner waits for (-1: unknown, or not blocked)
  };

  // Owning thread only.
  void set_oldest(const OpStamp* op);  // nullptr: nothing in flight
  void set_blocked(bool blocked);      // false also forgets the peer
  void set_peer(int peer);
  void note_progress() {
    progress_.store(progress_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // While it lives, the owning thread is blocked (set_blocked(true), then false).
  class Blocked {
   public:
    explicit Blocked(CommActivity& a) : a_(a) { a_.set_blocked(true); }
    ~Blocked() { a_.set_blocked(false); }
    Blocked(const Blocked&) = delete;
    Blocked& operator=(const Blocked&) = delete;

   private:
    CommActivity& a_;
  };

  // Any thread.
  Snapshot snapshot() const;
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> version_{0};  // odd while the owner writes the operation's fields
  std::atomic<uint64_t> seq_{0};
  std::atomic<const char*> name_{""};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<int64_t> issued_ns_{0};  // steady_clock, since its epoch
  std::atomic<bool> blocked_{false};
  std::atomic<int> peer_{-1};
  std::atomic<uint64_t> progress_{0};
};

// Thrown when an operation times out or its transport fails (and the communicator is not set to
// abort the job instead), and by every call on a communicator that has failed before.
class CollectiveError : public std::runtime_error {
 public:
  explicit CollectiveError(const std::string& what) : std::runtime_error(what) {}
};

// A pending operation, returned by every collective.
class Work {
 public:
  virtual ~Work();
  // Drives the communicator once (like Communicator::progress) and returns whether this
  // operation has completed. Throws CollectiveError if this or an earlier operation failed.
  virtual bool test() = 0;
  // Drives the communicator until this operation completes; times out per the contract above.
  virtual void wait() = 0;
};

struct CommOptions {
  // Seconds an operation may take from being issued to completing.
  double timeout_s = 300;
  // On timeout or transport error: true aborts the whole job (MPI_Abort, exit code 1) after
  // printing why; false (tests only) poisons the communicator and throws CollectiveError.
  bool abort_on_error = true;
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl"
  // The backend and the path it takes for this job's ranks, for the log (e.g. "mpi, hierarchical:
  // shared memory within each of 2 hosts x 2 ranks, MPI between them (2 rails)").
  virtual std::string describe() const { return backend(); }

  // Memory for buffers that are communicated every step (flat gradients, ZeRO shards), allocated
  // once at start-up: operations on it can skip staging copies (mpi on one node: peers read and
  // write it directly, one pass over the data instead of three). Collective: every rank calls it
  // with the same size, in the same order. Host memory (mpi, whose shared-memory paths first meet
  // the other ranks as an operation of its own, "allocate": within the timeout, counted by
  // sequence()) or device memory (nccl, whose zeroing is waited for likewise), zero-filled,
  // valid until the communicator is destroyed. An operation's buffer must come from it on every
  // rank or on none (the mpi backend checks and fails the operation otherwise).
  // This default gives page-aligned host memory, touched once, owned by the communicator.
  virtual void* allocate(size_t bytes);

  // Every rank ends with the element-wise reduction of all ranks' buf[0, count).
  virtual std::unique_ptr<Work> all_reduce(void* buf, size_t count, DType dtype, ReduceOp op) = 0;
  // Uneven shards (ZeRO): counts[r] elements belong to rank r, contiguous, in rank order; buf
  // holds sum(counts) elements on every rank; counts.size() == size(), zeros allowed.
  // Afterwards buf[shard_offset(counts, rank()), +counts[rank()]) holds the reduction of that
  // slice over all ranks; the rest of buf is unspecified.
  virtual std::unique_ptr<Work> reduce_scatter(void* buf, const std::vector<size_t>& counts,
                                               DType dtype, ReduceOp op) = 0;
  // Each rank contributes its slice (laid out as for reduce_scatter) in place; afterwards every
  // rank holds every rank's slice.
  virtual std::unique_ptr<Work> all_gather(void* buf, const std::vector<size_t>& counts,
                                           DType dtype) = 0;
  // Every rank ends with root's buf[0, count).
  virtual std::unique_ptr<Work> broadcast(void* buf, size_t count, DType dtype, int root) = 0;
  // Blocks until every rank has called barrier (and has completed every earlier operation on
  // this communicator); times out like any operation.
  virtual void barrier() = 0;
  // Point-to-point, for data only some pairs exchange (in-memory checkpoint replicas): send
  // buf[0, bytes) to rank `to`, or receive bytes from rank `from` into buf. A peer of -1 means
  // none: the operation completes at once, so that every rank can issue the same operations
  // (the sequence numbers stay aligned across ranks). A send matches the receive its peer
  // issued in the same order; bytes <= INT_MAX per call. Not collective; times out like any
  // operation. This default (backends without it: nccl, a single rank's self) throws
  // CollectiveError unless the peer is -1.
  virtual std::unique_ptr<Work> send(const void* buf, size_t bytes, int to);
  virtual std::unique_ptr<Work> recv(void* buf, size_t bytes, int from);
  // Advances outstanding operations as far as possible without waiting for peers, and checks
  // their deadlines. Call it between layers of backward to overlap communication with compute.
  virtual void progress() = 0;
  // Prints "[rank r/n] aborting: why" and fails every peer fast (MPI_Abort with exit_code:
  // mpirun's and srun's exit code); never returns.
  [[noreturn]] virtual void abort(const std::string& why, int exit_code = 1) = 0;

  // Operations issued so far; the next operation gets sequence() + 1.
  uint64_t sequence() const { return sequence_; }

  // For a watchdog thread; any thread may call these two, at any time between the end of
  // creation and the start of destruction. Neither calls MPI nor blocks.
  //
  // What this rank's communicator is doing (see CommActivity).
  const CommActivity& activity() const { return activity_; }
  // Liveness shared between ranks that share memory: publishes `beats` (a count of this rank's
  // progress that only grows) where the peers can read it, and returns the sum of the peers'
  // last published counts, which changes whenever any of them has made progress. A rank waiting
  // for a peer that is busy but healthy (rank 0 committing a checkpoint) can tell it from one
  // that is stopped or dead. Backends where the ranks share no memory (nccl, the mpi backend
  // across nodes, one rank) publish nothing and return 0: there a rank sees only itself.
  virtual uint64_t share_liveness(uint64_t beats);

 protected:
  Communicator() = default;
  uint64_t next_sequence() { return ++sequence_; }
  CommActivity activity_;  // backends publish here (from the owning thread)

 private:
  struct Free {
    void operator()(void* p) const;
  };
  uint64_t sequence_ = 0;
  std::vector<std::unique_ptr<void, Free>> allocations_;  // from the default allocate()
};

// Contiguous near-equal shards of `total` elements over `world` ranks: the first total % world
// ranks get one extra element.
std::vector<size_t> shard_counts(size_t total, int world);
// Offset of rank r's shard: the sum of counts[0, r).
size_t shard_offset(const std::vector<size_t>& counts, int r);

// Root's `value` on every rank (the others' `value` is ignored): its length, then its bytes, in
// two broadcasts. Host memory: not for a communicator that reduces device memory (NCCL's).
// Collective; throws as broadcast does.
std::string broadcast_string(Communicator& comm, const std::string& value, int root);

// "[rank 1/2] all_reduce(seq=812, bytes=4194304, timeout=30s)": the prefix of every error.
std::string describe_op(int rank, int size, const char* op, uint64_t seq, size_t bytes,
                        double timeout_s);

// The argument checks of every backend, made before anything is issued (every rank sees the
// same arguments, so every rank throws and nobody is left waiting). std::invalid_argument.
void check_shard_counts(const std::vector<size_t>& counts, int size);  // one count per rank
void check_root(int root, int size);                                   // broadcast root

}  // namespace rm

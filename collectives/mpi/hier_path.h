// The hierarchical path of the mpi backend: ranks on several hosts, the same number on each,
// host after host (ranks h*L .. h*L+L-1 on host h: mpirun --map-by slot with a hostfile, Slurm's
// block distribution). Within a host bytes move through shared memory (ShmEngine), between hosts
// over MPI -- instead of MPI for everything, whose intra-host half would take the TCP loopback.
//
// Two inter-host layouts (MpiOptions::hier):
//  - rails (default): local rank j of every host forms "rail" j (H ranks, one per host). An
//    all-reduce is a shared-memory reduce-scatter within each host (local rank j gets the
//    host's sum of slice j), an MPI all-reduce of slice j on rail j, and a shared-memory
//    all-gather within each host. Every rank carries 1/L of the inter-host bytes, on L
//    parallel connections: the layout NCCL uses across nodes.
//  - leaders: a shared-memory all-reduce within each host, an MPI all-reduce of the whole
//    buffer among local rank 0 of every host, and a shared-memory broadcast from it. One
//    connection per host carries all of its bytes.
// Reduce-scatter (rails) reduces each host's block of shards within the host, then each rail
// reduce-scatters its members' shards (strided in the buffer); all-gather
// is the reverse (an MPI all-gather in place on each rail, then each host's block within the
// host). bf16 reductions do not come here: summing twice would round twice, and the contract
// (communicator.h) promises one rounding of the rank-ordered float sum.
//
// Ordering: three stages, each a FIFO in issue order on every rank -- the in-host engine
// (reductions), the rails' MPI requests (issued in issue order once an op's in-host stage is
// done; complete in any order) and a second engine for the out-host stage (gathers), started
// once the op's MPI request completed. Every rank of a host feeds each engine the same tasks in
// the same order, every rank of a rail issues the same MPI calls in the same order, and a
// reduction of op k+1 proceeds while op k crosses the network. Buffers of operations in flight at
// once must not overlap (the communicator's contract already forbids touching them).
//
// Mismatched collectives: ranks of a host compare what they announce before touching each
// other's bytes (ShmEngine), the caller's op included although the in-host stage always sums,
// and messages name the job's ranks. Between hosts nothing compares: hosts whose ranks agree
// among themselves but not with another host's (every rank of one averaging, of the other
// summing) are no more caught than on the plain MPI path.
//
// Not thread-safe (the communicator's owning thread). Failures (MPI errors, a poisoned engine)
// are thrown as HierFailure naming the op's owner, for the communicator to report.
#pragma once

#include <mpi.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/mpi/shm_engine.h"

namespace rm::detail {

enum class HierLayout { kRails, kLeaders };

struct HierFailure {
  const void* owner;  // the HierOp's owner
  std::string what;
};

struct HierOp {
  const void* owner = nullptr;  // the communicator's op, named in failures
  bool done = false;

  // Stage 1: in-host reductions, run in order on the in engine.
  std::vector<ShmTask> in_tasks;
  size_t in_next = 0;
  bool in_started = false;
  // Stage 2, on this rank's rail (leaders: rail 0), H ranks in host order. Reductions are an
  // all-to-all that brings every host's copy of this rank's part into `scratch`, reduced in host
  // order into `reduce_to` (then divided for kAvg); an all-reduce then all-gathers the parts in
  // place on the second rail communicator, in issue order. Ring bytes on the wire: see
  // MpiCommunicator's Finish for why not MPI's own in-place reductions.
  enum class Rail { kNone, kAllReduce, kReduceScatter, kAllGather } rail = Rail::kNone;
  bool rail_issued = false, exchanged = false, gather_issued = false, rail_done = false;
  MPI_Request request = MPI_REQUEST_NULL;
  char* rail_buf = nullptr;                  // the rail's elements, at rail_displs
  std::vector<int> rail_counts, rail_displs;  // per host: its part (all-gather: its shard)
  std::vector<int> recv_counts, recv_displs;  // reductions: this rank's part from every host
  std::vector<char> scratch;
  char* reduce_to = nullptr;
  size_t reduce_count = 0;
  bool avg = false;
  // Stage 3: in-host gathers, run in order on the out engine.
  std::vector<ShmTask> out_tasks;
  size_t out_next = 0;
  bool out_started = false;
  DType dtype = DType::kFloat32;
};

class HierPath {
 public:
  // Collective over `comm`. Null when the ranks are not laid out as described above, or are on
  // one host, or one per host (then plain MPI is the same thing). Throws CollectiveError on MPI
  // failure.
  static std::unique_ptr<HierPath> make(MPI_Comm comm, size_t slot_bytes, HierLayout layout);
  ~HierPath();
  HierPath(const HierPath&) = delete;
  HierPath& operator=(const HierPath&) = delete;

  int hosts() const { return hosts_; }
  int local_size() const { return local_size_; }
  HierLayout layout() const { return layout_; }
  // Registered memory of the in-host engine (its reductions skip staging on it).
  void* allocate(size_t bytes) { return in_->allocate(bytes); }

  // Fill `op` (its owner set by the caller) and queue it. fp32 and fp64 only.
  void all_reduce(std::shared_ptr<HierOp> op, char* buf, size_t count, DType dtype, bool avg);
  void reduce_scatter(std::shared_ptr<HierOp> op, char* buf, const std::vector<size_t>& counts,
                      DType dtype, bool avg);
  void all_gather(std::shared_ptr<HierOp> op, char* buf, const std::vector<size_t>& counts,
                  DType dtype);

  // Advances every queued op as far as it can without waiting; returns whether anything moved.
  // Throws HierFailure.
  bool advance();
  bool idle() const { return in_q_.empty() && rail_q_.empty() && out_q_.empty(); }
  // Sleeps up to max_us on a local peer that an engine's current task waits for, if any.
  void block(long max_us);
  bool waits_for_peer_on(int cpu) const;
  // For a timeout message about `op`: which stage it is in and whom it waits for.
  std::string waiting_for(const HierOp& op) const;
  // Whether `op` waits on a rank of this host (its in-host reduction or gather) rather than on
  // the network: that rank is most likely held by the network itself, and should be the one to
  // time out and name the host it lost.
  bool waits_on_local_peer(const HierOp& op) const {
    return op.in_next < op.in_tasks.size() || op.rail == HierOp::Rail::kNone || op.rail_done;
  }
  int failed_peer() const;  // a local peer that poisoned an engine (global rank), or -1
  void poison();
  uint64_t share_liveness(uint64_t beats) { return in_->share_liveness(beats); }

 private:
  HierPath() = default;
  MPI_Datatype mpi_type(DType dtype) const;
  int global_rank(int host, int local) const { return host * local_size_ + local; }
  void queue(std::shared_ptr<HierOp> op);
  void plan_exchange(HierOp& op, char* base, std::vector<size_t> counts,
                     std::vector<size_t> displs, bool avg);
  void issue_rail(HierOp& op);
  void reduce_exchanged(HierOp& op);
  void issue_gather(HierOp& op);
  bool advance_engine(ShmEngine& engine, std::deque<std::shared_ptr<HierOp>>& q, bool in);

  MPI_Comm node_ = MPI_COMM_NULL;  // the ranks of this host
  MPI_Comm rail_ = MPI_COMM_NULL;  // local rank j of every host (rail 0: the hosts' leaders)
  MPI_Comm rail_gather_ = MPI_COMM_NULL;  // the same ranks: all-reduces' all-gathers, which
                                          // start at different times on different ranks
  HierLayout layout_ = HierLayout::kRails;
  int rank_ = 0, size_ = 1, host_ = 0, hosts_ = 1, local_ = 0, local_size_ = 1;
  std::vector<std::string> host_names_;  // per host, for messages
  std::unique_ptr<ShmEngine> in_, out_;
  std::deque<std::shared_ptr<HierOp>> in_q_, rail_q_, out_q_;
};

}  // namespace rm::detail

#include "collectives/mpi/mpi_communicator.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <thread>
#include <vector>

#include "collectives/mpi/hier_path.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/shm_engine.h"
#include "collectives/reduce_kernels.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

// What an MPI-path operation still has to do once its request completes.
//  - kReduceReceived (reduce-scatter): the request was an all-to-all that brought every rank's
//    copy of this rank's shard into `scratch`; reduce them in rank order into the shard.
//  - kReduceThenGather (all-reduce): the same, then the op's second request, an in-place
//    all-gather of the reduced shards on the stage-two communicator (see issue_stage_two).
// Reductions go this way for every dtype rather than through MPI_Iallreduce/_Ireduce_scatter:
//  - the bytes on the wire are a ring's (each rank sends and receives (p-1)/p of the buffer per
//    half), where Open MPI's non-blocking in-place all-reduce (libnbc) takes a binomial reduce then
//    broadcast: the whole buffer crosses each link twice, one direction at a time -- half the link
//    rate on 2 hosts (measured: 0.06 against 0.12 GB/s busbw on a 1 Gbit/s link);
//  - MPI combines partial results in an order of its choosing and has no bf16; the host kernels
//    sum in rank order and give the shm path's bits exactly.
enum class Finish { kNone, kReduceReceived, kReduceThenGather };

// A bound on the elements any rank's exchange of a reduction addresses with ints, from the shard
// counts every rank holds alike: its shard from each of `parties` (the ranks on the flat MPI
// path, at displacements shard x rank; the hosts on the hierarchical path, each sending its part
// of the rank's slice), so the largest shard times the parties, plus one element a party for the
// rounding of a part per host.
size_t exchange_bound(const std::vector<size_t>& counts, int parties) {
  const size_t largest = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  return (largest + 1) * static_cast<size_t>(parties);
}

struct Op : OpStamp {
  bool done = false;
  // Shared-memory path: the task, handed to the engine when the op reaches the queue's head.
  bool shm_started = false;
  detail::ShmTask task;
  // MPI path: the request, the arrays MPI reads until completion, and the finishing touch.
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<int> counts;
  std::vector<int> displs;
  std::vector<int> recv_counts;  // reductions' all-to-all: this rank's shard from every rank
  std::vector<int> recv_displs;
  std::vector<char> scratch;    // those shards, in rank order
  bool stage_one_done = false;  // kReduceThenGather: ready to issue its all-gather
  Finish finish = Finish::kNone;
  char* buf = nullptr;
  DType dtype = DType::kFloat32;
  bool avg = false;
  size_t finish_count = 0;   // elements of this rank's shard
  size_t finish_offset = 0;  // bytes: where this rank's shard belongs
  // Hierarchical path: the op's stages (hier_path.h).
  std::shared_ptr<detail::HierOp> hier;
};

class MpiCommunicator;

// RM_MPI_CHECK handler inside an operation: reports the call with the op's context.
struct OpError {
  MpiCommunicator* comm;
  const Op* op;
  [[noreturn]] void operator()(const char* call, int code) const;
};

class MpiWork final : public Work {
 public:
  MpiWork(MpiCommunicator* comm, std::shared_ptr<Op> op) : comm_(comm), op_(std::move(op)) {}
  bool test() override;
  void wait() override;

 private:
  MpiCommunicator* comm_;
  std::shared_ptr<Op> op_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, CommOptions options, MpiOptions mpi_options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  std::string describe() const override;
  void* allocate(size_t bytes) override;

  std::unique_ptr<Work> all_reduce(void* buf, size_t count, DType dtype, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter(void* buf, const std::vector<size_t>& counts, DType dtype,
                                       ReduceOp op) override;
  std::unique_ptr<Work> all_gather(void* buf, const std::vector<size_t>& counts,
                                   DType dtype) override;
  std::unique_ptr<Work> broadcast(void* buf, size_t count, DType dtype, int root) override;
  void barrier() override;
  std::unique_ptr<Work> send(const void* buf, size_t bytes, int to) override;
  std::unique_ptr<Work> recv(void* buf, size_t bytes, int from) override;
  void progress() override { poll(); }
  [[noreturn]] void abort(const std::string& why, int exit_code = 1) override;
  uint64_t share_liveness(uint64_t beats) override {
    return shm_ ? shm_->share_liveness(beats) : hier_ ? hier_->share_liveness(beats) : 0;
  }

  // Drives everything until `op` completes (or fails).
  void wait_for(const Op& op);
  // advance() for progress() and Work::test(), which callers may spin on.
  void poll();
  // Advances every outstanding op and checks deadlines; returns whether anything moved.
  bool advance();
  // peer_failed: the failure is a peer's, which reported it (the poison) and is aborting the
  // job itself: this rank gives that abort, with its exit code, a head start.
  [[noreturn]] void fail(const Op& op, const std::string& what, bool peer_failed = false);

 private:
  std::shared_ptr<Op> new_op(const char* name, size_t bytes);
  std::unique_ptr<Work> issue_shm(std::shared_ptr<Op> op, detail::ShmKind kind, void* buf,
                                  std::vector<size_t> counts, DType dtype, ReduceOp rop);
  std::unique_ptr<Work> issue_mpi(std::shared_ptr<Op> op);
  std::unique_ptr<Work> issue_hier(std::shared_ptr<Op> op);
  bool advance_hier();
  std::unique_ptr<Work> done_op(std::shared_ptr<Op> op);
  std::unique_ptr<Work> issue_exchange_reduction(std::shared_ptr<Op> op, void* buf,
                                                 const std::vector<size_t>& counts, DType dtype,
                                                 ReduceOp rop, bool all_reduce);
  void issue_stage_two();
  void finish_mpi(Op& op);
  void wait_all();
  void publish_oldest();  // the oldest incomplete op, for activity()
  // A barrier issued and waited for as an op named `name` (with `bytes` for its messages): under
  // the timeout, naming the late rank on the shared-memory path.
  void meet(const char* name, size_t bytes);
  void check_usable() const;
  void check_counts(const Op& op, size_t count) const;
  // bf16 as plain 2-byte words: MPI only moves them (reductions go through the host kernels).
  MPI_Datatype mpi_type(DType dtype) const {
    switch (dtype) {
      case DType::kFloat32:
        return MPI_FLOAT;
      case DType::kFloat64:
        return MPI_DOUBLE;
      case DType::kBFloat16:
        return MPI_UINT16_T;
    }
    return MPI_DATATYPE_NULL;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  // MPI path: the second requests of two-request ops (all-reduce). They are issued when the
  // first completes, which happens at different times on different ranks; on comm_ they would
  // interleave differently with the caller's later operations, so they get their own
  // communicator, where issue_stage_two keeps them in issue order on every rank.
  MPI_Comm stage_two_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  CommOptions options_;
  bool local_ = false;  // one rank and no MPI requested: every op is complete at once
  std::unique_ptr<detail::ShmEngine> shm_;
  // Ranks on several hosts, laid out host after host: shared memory within hosts, MPI between.
  std::unique_ptr<detail::HierPath> hier_;
  std::deque<std::shared_ptr<Op>> hier_pending_;  // in issue order; complete in any order
  std::deque<std::shared_ptr<Op>> shm_queue_;     // in issue order; the head is running
  std::vector<std::shared_ptr<Op>> mpi_pending_;  // MPI requests, complete in any order
  std::deque<std::shared_ptr<Op>> stage_two_;     // two-request ops, in issue order
  std::string broken_;                            // the failure that broke this communicator
};

// How long a waiting rank spins before it considers leaving the CPU, and how long at most while
// the peers it waits for run elsewhere (see wait_for). Phases of a pipeline step take tens of
// microseconds when every rank runs; a descheduled rank takes milliseconds.
constexpr auto kSpin = std::chrono::microseconds(20);
constexpr auto kSpinLimit = std::chrono::milliseconds(2);

void OpError::operator()(const char* call, int code) const {
  comm->fail(*op, std::string("failed: ") + call + ": " + detail::mpi_error_string(code));
}

bool MpiWork::test() {
  if (!op_->done) comm_->poll();
  return op_->done;
}

void MpiWork::wait() {
  comm_->wait_for(*op_);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, CommOptions options, MpiOptions mpi_options)
    : options_(options) {
  const detail::ThrowMpiError on_error{"make_mpi_communicator"};
  RM_MPI_CHECK(MPI_Comm_dup(comm, &comm_), on_error);
  RM_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), on_error);
  RM_MPI_CHECK(MPI_Comm_rank(comm_, &rank_), on_error);
  RM_MPI_CHECK(MPI_Comm_size(comm_, &size_), on_error);
  using Algorithm = MpiOptions::Algorithm;
  if (mpi_options.algorithm == Algorithm::kMpi) {
    RM_MPI_CHECK(MPI_Comm_dup(comm_, &stage_two_comm_), on_error);
    RM_MPI_CHECK(MPI_Comm_set_errhandler(stage_two_comm_, MPI_ERRORS_RETURN), on_error);
    return;
  }
  if (size_ == 1) {
    local_ = true;
    return;
  }
  MPI_Comm node = MPI_COMM_NULL;
  RM_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), on_error);
  int node_size = 0;
  RM_MPI_CHECK(MPI_Comm_size(node, &node_size), on_error);
  MPI_Comm_free(&node);
  if (node_size == size_) {
    shm_ = std::make_unique<detail::ShmEngine>(comm_, mpi_options.shm_slot_bytes);
  } else if (mpi_options.algorithm == Algorithm::kSharedMemory) {
    throw CollectiveError("[rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
                          "] make_mpi_communicator: shared memory requested but the ranks span " +
                          "more than one node");
  } else {
    // bf16 reductions and broadcasts take the plain MPI path on either (see hier_path.h).
    RM_MPI_CHECK(MPI_Comm_dup(comm_, &stage_two_comm_), on_error);
    RM_MPI_CHECK(MPI_Comm_set_errhandler(stage_two_comm_, MPI_ERRORS_RETURN), on_error);
    if (mpi_options.algorithm != Algorithm::kMpiAcrossHosts) {
      hier_ = detail::HierPath::make(comm_, mpi_options.shm_slot_bytes, mpi_options.hier_layout);
    }
  }
}

std::string MpiCommunicator::describe() const {
  const std::string n = std::to_string(size_);
  if (local_) return "mpi, one rank";
  if (shm_) return "mpi, shared memory (" + n + " ranks on one host)";
  if (hier_) {
    const bool rails = hier_->layout() == detail::HierLayout::kRails;
    return "mpi, hierarchical: shared memory within each of " + std::to_string(hier_->hosts()) +
           " hosts x " + std::to_string(hier_->local_size()) + " ranks, MPI between them (" +
           (rails ? std::to_string(hier_->local_size()) + " rails" : "host leaders") + ")";
  }
  return "mpi, MPI collectives (" + n + " ranks)";
}

MpiCommunicator::~MpiCommunicator() {
  if (!broken_.empty()) return;  // peers may be gone: collective frees could hang; leak instead
  try {
    wait_all();
    // The windows are freed collectively (the engines' over each host); meet first, under the
    // timeout, so a missing peer gives an error instead of a hang in MPI_Win_free.
    if (shm_ || hier_) meet("destroy", 0);
  } catch (const CollectiveError&) {
    return;  // already reported
  }
  shm_.reset();
  hier_.reset();
  if (stage_two_comm_ != MPI_COMM_NULL) MPI_Comm_free(&stage_two_comm_);
  MPI_Comm_free(&comm_);
}

void* MpiCommunicator::allocate(size_t bytes) {
  check_usable();
  if (!shm_ && !hier_) return Communicator::allocate(bytes);
  // MPI allocates the shared window in a blocking call that no deadline reaches: meet first,
  // under the timeout as any collective, so that a rank that stopped or died fails the others
  // here, named where the shared-memory path can, instead of hanging them there.
  meet("allocate", bytes);
  return shm_ ? shm_->allocate(bytes) : hier_->allocate(bytes);
}

std::shared_ptr<Op> MpiCommunicator::new_op(const char* name, size_t bytes) {
  auto op = std::make_shared<Op>();
  static_cast<OpStamp&>(*op) = stamp_op(next_sequence(), name, bytes, options_.timeout_s);
  return op;
}

void MpiCommunicator::check_usable() const {
  if (!broken_.empty()) {
    throw CollectiveError("[rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
                          "] communicator unusable after an earlier failure: " + broken_);
  }
}

void MpiCommunicator::check_counts(const Op& op, size_t count) const {
  // Every rank sees the same counts, so every rank throws here: nobody is left waiting. Only
  // counts every rank computes alike may come here (a total, a bound from the largest shard),
  // never this rank's own shard: shards differ (by one element, or by whole units of a ZeRO
  // bucket), and the rank with the larger one would throw while the others waited in the
  // exchange for it until their timeout.
  if (count > static_cast<size_t>(INT_MAX)) {
    throw CollectiveError(describe_op(rank_, size_, op.name, op.seq, op.bytes, options_.timeout_s) +
                          " backend mpi does not support more than INT_MAX elements in one call "
                          "or its exchange between ranks on its MPI path (" +
                          std::to_string(count) + " here)");
  }
}

std::unique_ptr<Work> MpiCommunicator::done_op(std::shared_ptr<Op> op) {
  op->done = true;
  return std::make_unique<MpiWork>(this, std::move(op));
}

std::unique_ptr<Work> MpiCommunicator::issue_shm(std::shared_ptr<Op> op, detail::ShmKind kind,
                                                 void* buf, std::vector<size_t> counts, DType dtype,
                                                 ReduceOp rop) {
  op->task.kind = kind;
  op->task.buf = static_cast<char*>(buf);
  op->task.dtype = dtype;
  op->task.op = rop;
  op->task.asked = rop;
  op->task.counts = std::move(counts);
  shm_queue_.push_back(op);
  publish_oldest();
  return std::make_unique<MpiWork>(this, std::move(op));
}

std::unique_ptr<Work> MpiCommunicator::issue_mpi(std::shared_ptr<Op> op) {
  mpi_pending_.push_back(op);
  publish_oldest();
  return std::make_unique<MpiWork>(this, std::move(op));
}

std::unique_ptr<Work> MpiCommunicator::issue_hier(std::shared_ptr<Op> op) {
  hier_pending_.push_back(op);
  publish_oldest();
  return std::make_unique<MpiWork>(this, std::move(op));
}

std::unique_ptr<Work> MpiCommunicator::all_reduce(void* buf, size_t count, DType dtype,
                                                  ReduceOp rop) {
  check_usable();
  auto op = new_op("all_reduce", count * dtype_size(dtype));
  if (local_) return done_op(std::move(op));
  if (shm_) {
    return issue_shm(std::move(op), detail::ShmKind::kAllReduce, buf, shard_counts(count, size_),
                     dtype, rop);
  }
  check_counts(*op, count);
  const bool hier = hier_ && dtype != DType::kBFloat16;
  check_counts(*op, exchange_bound(shard_counts(count, size_), hier ? hier_->hosts() : size_));
  if (hier) {
    op->hier = std::make_shared<detail::HierOp>();
    op->hier->owner = op.get();
    hier_->all_reduce(op->hier, static_cast<char*>(buf), count, dtype, rop == ReduceOp::kAvg);
    return issue_hier(std::move(op));
  }
  return issue_exchange_reduction(std::move(op), buf, shard_counts(count, size_), dtype, rop,
                                  true);
}

std::unique_ptr<Work> MpiCommunicator::reduce_scatter(void* buf, const std::vector<size_t>& counts,
                                                      DType dtype, ReduceOp rop) {
  check_usable();
  check_shard_counts(counts, size_);
  const size_t total = shard_offset(counts, size_);
  auto op = new_op("reduce_scatter", total * dtype_size(dtype));
  if (local_) return done_op(std::move(op));
  if (shm_) {
    return issue_shm(std::move(op), detail::ShmKind::kReduceScatter, buf, counts, dtype, rop);
  }
  check_counts(*op, total);
  const bool hier = hier_ && dtype != DType::kBFloat16;
  check_counts(*op, exchange_bound(counts, hier ? hier_->hosts() : size_));
  if (hier) {
    op->hier = std::make_shared<detail::HierOp>();
    op->hier->owner = op.get();
    hier_->reduce_scatter(op->hier, static_cast<char*>(buf), counts, dtype, rop == ReduceOp::kAvg);
    return issue_hier(std::move(op));
  }
  return issue_exchange_reduction(std::move(op), buf, counts, dtype, rop, false);
}

std::unique_ptr<Work> MpiCommunicator::all_gather(void* buf, const std::vector<size_t>& counts,
                                                  DType dtype) {
  check_usable();
  check_shard_counts(counts, size_);
  const size_t total = shard_offset(counts, size_);
  auto op = new_op("all_gather", total * dtype_size(dtype));
  if (local_) return done_op(std::move(op));
  if (shm_) {
    return issue_shm(std::move(op), detail::ShmKind::kAllGather, buf, counts, dtype,
                     ReduceOp::kSum);
  }
  check_counts(*op, total);
  if (hier_) {  // moves bytes only: bf16 too
    op->hier = std::make_shared<detail::HierOp>();
    op->hier->owner = op.get();
    hier_->all_gather(op->hier, static_cast<char*>(buf), counts, dtype);
    return issue_hier(std::move(op));
  }
  op->counts.assign(counts.begin(), counts.end());
  op->displs.resize(counts.size());
  for (int r = 0; r < size_; ++r) {
    op->displs[static_cast<size_t>(r)] = static_cast<int>(shard_offset(counts, r));
  }
  RM_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, op->counts.data(),
                               op->displs.data(), mpi_type(dtype), comm_, &op->request),
               (OpError{this, op.get()}));
  return issue_mpi(std::move(op));
}

std::unique_ptr<Work> MpiCommunicator::broadcast(void* buf, size_t count, DType dtype, int root) {
  check_usable();
  check_root(root, size_);
  auto op = new_op("broadcast", count * dtype_size(dtype));
  if (local_) return done_op(std::move(op));
  check_counts(*op, count);
  // Rare (start-up, resume): MPI's own broadcast on either path.
  RM_MPI_CHECK(MPI_Ibcast(buf, static_cast<int>(count), mpi_type(dtype), root, comm_, &op->request),
               (OpError{this, op.get()}));
  return issue_mpi(std::move(op));
}

// Reduce-scatter (and the first half of all-reduce) on the MPI path: an all-to-all sends rank s
// its shard of this rank's buffer, and receives every rank's copy of this rank's shard into
// scratch; finish_mpi reduces them with the host kernels, in rank order, exactly as the
// shared-memory engine does. The same bytes cross the network as in a ring reduce-scatter.
std::unique_ptr<Work> MpiCommunicator::issue_exchange_reduction(std::shared_ptr<Op> op, void* buf,
                                                                const std::vector<size_t>& counts,
                                                                DType dtype, ReduceOp rop,
                                                                bool all_reduce) {
  const size_t own = counts[static_cast<size_t>(rank_)];  // own * size_ <= exchange_bound()
  op->buf = static_cast<char*>(buf);
  op->dtype = dtype;
  op->avg = rop == ReduceOp::kAvg;
  op->finish = all_reduce ? Finish::kReduceThenGather : Finish::kReduceReceived;
  op->finish_count = own;
  op->finish_offset = shard_offset(counts, rank_) * dtype_size(dtype);
  op->counts.assign(counts.begin(), counts.end());
  op->displs.resize(counts.size());
  op->recv_counts.assign(counts.size(), static_cast<int>(own));
  op->recv_displs.resize(counts.size());
  for (int r = 0; r < size_; ++r) {
    op->displs[static_cast<size_t>(r)] = static_cast<int>(shard_offset(counts, r));
    op->recv_displs[static_cast<size_t>(r)] = static_cast<int>(own * static_cast<size_t>(r));
  }
  // Per operation, like the temporaries MPI's own collectives allocate on this path.
  op->scratch.resize(own * static_cast<size_t>(size_) * dtype_size(dtype));
  RM_MPI_CHECK(MPI_Ialltoallv(buf, op->counts.data(), op->displs.data(), mpi_type(dtype),
                              op->scratch.data(), op->recv_counts.data(), op->recv_displs.data(),
                              mpi_type(dtype), comm_, &op->request),
               (OpError{this, op.get()}));
  if (all_reduce) stage_two_.push_back(op);
  return issue_mpi(std::move(op));
}

// Issues the all-gathers of two-request ops whose first request has completed, strictly in issue
// order (an op waits for every earlier op's), so every rank issues them in the same order.
void MpiCommunicator::issue_stage_two() {
  while (!stage_two_.empty() && stage_two_.front()->stage_one_done) {
    std::shared_ptr<Op> op = std::move(stage_two_.front());
    stage_two_.pop_front();
    op->finish = Finish::kNone;
    RM_MPI_CHECK(
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->buf, op->counts.data(),
                        op->displs.data(), mpi_type(op->dtype), stage_two_comm_, &op->request),
        (OpError{this, op.get()}));
    mpi_pending_.push_back(std::move(op));
  }
}

void MpiCommunicator::barrier() {
  check_usable();
  meet("barrier", 0);
}

void MpiCommunicator::meet(const char* name, size_t bytes) {
  // This rank's earlier operations complete first, so that a rank leaving the meeting knows every
  // rank has completed them (barrier()'s promise). The shared-memory queue runs in order anyway;
  // an MPI_Ibarrier issued beside outstanding MPI or hierarchical operations could complete
  // while a peer still had them in flight.
  wait_all();
  auto op = new_op(name, bytes);
  if (local_) return;
  if (shm_) {
    op->task.kind = detail::ShmKind::kBarrier;
    shm_queue_.push_back(op);
  } else {
    RM_MPI_CHECK(MPI_Ibarrier(comm_, &op->request), (OpError{this, op.get()}));
    mpi_pending_.push_back(op);
  }
  publish_oldest();
  wait_all();
}

void MpiCommunicator::finish_mpi(Op& op) {
  const size_t esize = dtype_size(op.dtype);
  if (op.finish == Finish::kReduceReceived || op.finish == Finish::kReduceThenGather) {
    std::vector<const void*> srcs(static_cast<size_t>(size_));
    for (size_t r = 0; r < srcs.size(); ++r)
      srcs[r] = op.scratch.data() + r * op.finish_count * esize;
    void* dst = op.buf + op.finish_offset;
    if (op.finish_count > 0) {
      detail::reduce_sources(op.dtype, op.avg ? ReduceOp::kAvg : ReduceOp::kSum, size_, srcs.data(),
                             op.finish_count, 1, &dst);
    }
    std::vector<char>().swap(op.scratch);
    if (op.finish == Finish::kReduceThenGather) {
      op.stage_one_done = true;  // not done: issue_stage_two issues its all-gather
      return;
    }
  }
  op.done = true;
}

// Point-to-point messages have a tag of their own: collectives never match them.
constexpr int kPointToPointTag = 7301;

std::unique_ptr<Work> MpiCommunicator::send(const void* buf, size_t bytes, int to) {
  check_usable();
  auto op = new_op("send", bytes);
  if (to < 0) return done_op(std::move(op));
  check_counts(*op, bytes);
  RM_MPI_CHECK(MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, to, kPointToPointTag, comm_,
                         &op->request),
               (OpError{this, op.get()}));
  return issue_mpi(std::move(op));
}

std::unique_ptr<Work> MpiCommunicator::recv(void* buf, size_t bytes, int from) {
  check_usable();
  auto op = new_op("recv", bytes);
  if (from < 0) return done_op(std::move(op));
  check_counts(*op, bytes);
  RM_MPI_CHECK(MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, from, kPointToPointTag, comm_,
                         &op->request),
               (OpError{this, op.get()}));
  return issue_mpi(std::move(op));
}

bool MpiCommunicator::advance() {
  check_usable();
  bool moved = false;
  while (!shm_queue_.empty()) {
    Op& head = *shm_queue_.front();
    if (!head.shm_started) {
      shm_->start(std::move(head.task));
      head.shm_started = true;
      moved = true;
    }
    const uint64_t before = shm_->phase();
    const bool finished = shm_->advance();
    moved = moved || shm_->phase() != before;
    if (!shm_->error().empty()) fail(head, "failed: " + shm_->error());
    if (!finished) break;
    head.done = true;
    shm_queue_.pop_front();
  }
  for (size_t i = 0; i < mpi_pending_.size();) {
    Op& op = *mpi_pending_[i];
    int flag = 0;
    RM_MPI_CHECK(MPI_Test(&op.request, &flag, MPI_STATUS_IGNORE), (OpError{this, &op}));
    if (flag) {
      finish_mpi(op);
      mpi_pending_[i] = std::move(mpi_pending_.back());
      mpi_pending_.pop_back();
      moved = true;
    } else {
      ++i;
    }
  }
  if (hier_ && advance_hier()) moved = true;
  if (moved) issue_stage_two();
  if (moved) {
    activity_.note_progress();
    publish_oldest();
  }
  if (moved || (shm_queue_.empty() && mpi_pending_.empty() && hier_pending_.empty())) return moved;

  // Nothing moved: is anyone overdue, or has a peer failed?
  const auto now = Clock::now();
  if (!shm_queue_.empty()) {
    const Op& head = *shm_queue_.front();
    const int failed = shm_->failed_peer();
    if (failed >= 0) {
      fail(head, "failed: rank " + std::to_string(failed) + " reported a failure", true);
    }
    if (now > head.deadline) {
      char text[96];
      std::snprintf(text, sizeof(text), "timed out after %.1f s",
                    std::chrono::duration<double>(now - head.issued).count());
      const std::string waiting = shm_->waiting_for();
      fail(head, text + (waiting.empty() ? "" : "; waiting for " + waiting));
    }
  }
  if (!hier_pending_.empty()) {
    const int failed = hier_->failed_peer();
    if (failed >= 0) {
      fail(*hier_pending_.front(), "failed: rank " + std::to_string(failed) + " reported a failure",
           true);
    }
    // A rank waiting in-host for a peer gives it a grace past the deadline: with the link to
    // another host cut, the peer (busy with the inter-host step) times out at about the same
    // moment, and only its message names the lost host; ours would name only the peer. Seen in
    // cluster_link_faults: a non-leader's in-host gather timed out first, 5.0 s against 5.0 s.
    const auto grace = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::clamp(options_.timeout_s / 2, 1.0, 30.0)));
    for (const auto& op : hier_pending_) {
      const auto extra = hier_->waits_on_local_peer(*op->hier) ? grace : Clock::duration{};
      if (now > op->deadline + extra) {
        char text[64];
        std::snprintf(text, sizeof(text), "timed out after %.1f s; ",
                      std::chrono::duration<double>(now - op->issued).count());
        fail(*op, text + hier_->waiting_for(*op->hier));
      }
    }
  }
  for (const auto& op : mpi_pending_) {
    if (now > op->deadline) {
      char text[128];
      std::snprintf(text, sizeof(text),
                    "timed out after %.1f s (MPI request still pending; MPI does not say which "
                    "rank is missing)",
                    std::chrono::duration<double>(now - op->issued).count());
      fail(*op, text);
    }
  }
  return false;
}

// Advances the hierarchical path; completed ops leave the pending list (in any order).
bool MpiCommunicator::advance_hier() {
  bool moved = false;
  try {
    moved = hier_->advance();
  } catch (const detail::HierFailure& f) {
    fail(*static_cast<const Op*>(f.owner), f.what);
  }
  for (auto it = hier_pending_.begin(); it != hier_pending_.end();) {
    if ((*it)->hier->done) {
      (*it)->done = true;
      it = hier_pending_.erase(it);
      moved = true;
    } else {
      ++it;
    }
  }
  return moved;
}

void MpiCommunicator::wait_for(const Op& op) {
  // How to wait is about who needs this core. A peer that last ran on this CPU (more ranks than
  // free cores) needs it now: sleep on its counter (futex) and let it run. A peer elsewhere will
  // answer soon: keep spinning, because leaving the CPU -- by sleeping or sched_yield -- hands
  // it to any other runnable process for a whole time slice (milliseconds: the kernel's EEVDF
  // scheduler lets the current task run to the end of its slice before a waking one). Past
  // kSpinLimit the peer is probably descheduled or stalled: sleep, checking deadlines between.
  const CommActivity::Blocked blocked(activity_);
  auto idle_since = Clock::now();
  while (!op.done) {
    if (advance()) {
      idle_since = Clock::now();
      continue;
    }
    if (op.done) break;
    const auto idle = Clock::now() - idle_since;
    if (idle < kSpin) continue;
    if (!hier_pending_.empty() && (idle > kSpinLimit || hier_->waits_for_peer_on(sched_getcpu()))) {
      activity_.set_peer(-1);
      hier_->block(2000);  // a local peer's counter; returns at once if none is waited for
      if (idle > kSpinLimit) sched_yield();
    } else if (shm_queue_.empty()) {
      sched_yield();  // MPI requests: MPI gives no better signal
    } else if (shm_ && (idle > kSpinLimit || shm_->waits_for_peer_on(sched_getcpu()))) {
      activity_.set_peer(shm_->blocking_peer());  // for a watchdog: who we sleep for
      shm_->block(2000);  // short: MPI requests and deadlines are checked in between
    }
  }
}

void MpiCommunicator::poll() {
  // Callers may spin on test(): hand the core over if a peer we wait for needs it (see
  // wait_for), but never otherwise -- that would cost a whole time slice on a busy machine.
  if (!advance() && !shm_queue_.empty() && shm_->waits_for_peer_on(sched_getcpu())) {
    sched_yield();
  }
}

void MpiCommunicator::wait_all() {
  // Hold a reference: completing an op drops the queue's, and the Work may be gone already.
  while (!shm_queue_.empty()) {
    const std::shared_ptr<Op> last = shm_queue_.back();
    wait_for(*last);
  }
  while (!hier_pending_.empty()) {
    const std::shared_ptr<Op> last = hier_pending_.back();
    wait_for(*last);
  }
  while (!mpi_pending_.empty() || !stage_two_.empty()) {
    const std::shared_ptr<Op> last = !stage_two_.empty() ? stage_two_.back() : mpi_pending_.back();
    wait_for(*last);
  }
}

void MpiCommunicator::publish_oldest() {
  // The shared-memory queue completes in order; MPI requests in any order.
  const Op* oldest = shm_queue_.empty() ? nullptr : shm_queue_.front().get();
  for (const auto& op : mpi_pending_) {
    if (oldest == nullptr || op->seq < oldest->seq) oldest = op.get();
  }
  if (!hier_pending_.empty() && (oldest == nullptr || hier_pending_.front()->seq < oldest->seq)) {
    oldest = hier_pending_.front().get();
  }
  // Between its two requests an op is in neither list above.
  if (!stage_two_.empty() && (oldest == nullptr || stage_two_.front()->seq < oldest->seq)) {
    oldest = stage_two_.front().get();
  }
  activity_.set_oldest(oldest);
}

void MpiCommunicator::fail(const Op& op, const std::string& what, bool peer_failed) {
  const std::string msg =
      describe_op(rank_, size_, op.name, op.seq, op.bytes, options_.timeout_s) + " " + what;
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  if (shm_) shm_->poison();
  if (hier_) hier_->poison();
  if (options_.abort_on_error) {
    // The job's exit code is that of the first MPI_Abort to reach mpirun: the failing peer's
    // (2 for bad input it found), not this rank's 1 -- which would otherwise often win, this
    // rank seeing the poison before the peer has left MPI_Abort. mpirun kills this rank meanwhile.
    if (peer_failed) std::this_thread::sleep_for(std::chrono::seconds(2));
    MPI_Abort(comm_, 1);
    std::abort();
  }
  broken_ = msg;
  throw CollectiveError(msg);
}

void MpiCommunicator::abort(const std::string& why, int exit_code) {
  std::fprintf(stderr, "[rank %d/%d] aborting: %s\n", rank_, size_, why.c_str());
  std::fflush(stderr);
  if (shm_) shm_->poison();
  if (hier_) hier_->poison();
  MPI_Abort(comm_, exit_code);
  std::abort();
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, CommOptions options,
                                                    MpiOptions mpi_options) {
  return std::make_unique<MpiCommunicator>(comm, options, mpi_options);
}

}  // namespace rm

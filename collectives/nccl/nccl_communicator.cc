#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_check.h"
#include "collectives/nccl/nccl_check.h"
#include "collectives/nccl/nccl_plan.h"
#include "collectives/nccl/nccl_types.h"
#include "kernels/cuda/cuda_check.h"  // RM_CUDA_CHECK

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

struct Op : OpStamp {
  cudaEvent_t event = nullptr;  // recorded after the op's kernels; from the pool
  bool done = false;
};

class NcclCommunicator;

// RM_CUDA_CHECK / RM_NCCL_CHECK handler inside an operation.
struct OpError {
  NcclCommunicator* comm;
  const Op* op;
  [[noreturn]] void operator()(const char* call, const char* error) const;
};

// Handler for set-up calls made outside any operation.
struct SetupError {
  int rank;
  [[noreturn]] void operator()(const char* call, const char* error) const {
    throw CollectiveError("[rank " + std::to_string(rank) + "] make_nccl_communicator: " + call +
                          " failed: " + error);
  }
};

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* comm, std::shared_ptr<Op> op) : comm_(comm), op_(std::move(op)) {}
  bool test() override;
  void wait() override;

 private:
  NcclCommunicator* comm_;
  std::shared_ptr<Op> op_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, CommOptions options, NcclOptions nccl_options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  void* allocate(size_t bytes) override;

  std::unique_ptr<Work> all_reduce(void* buf, size_t count, DType dtype, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter(void* buf, const std::vector<size_t>& counts, DType dtype,
                                       ReduceOp op) override;
  std::unique_ptr<Work> all_gather(void* buf, const std::vector<size_t>& counts,
                                   DType dtype) override;
  std::unique_ptr<Work> broadcast(void* buf, size_t count, DType dtype, int root) override;
  void barrier() override;
  void progress() override { advance(); }
  [[noreturn]] void abort(const std::string& why, int exit_code = 1) override;

  void advance();
  void wait_for(const Op& op);
  [[noreturn]] void fail(const Op& op, const std::string& what);

 private:
  // The constructor's work (it releases what this made where it throws).
  void init(MPI_Comm comm, const NcclOptions& nccl_options);
  // Frees the streams, events, device memory and (unless broken) the MPI communicator; the
  // NCCL communicator is destroyed or aborted before.
  void release_resources();
  std::shared_ptr<Op> new_op(const char* name, size_t bytes);
  // Rank 0's ncclUniqueId on every rank (an MPI broadcast polled against the timeout); throws,
  // naming rank 0's reason on every rank, where rank 0 could not make one.
  ncclUniqueId share_unique_id();
  // Polls until NCCL has enqueued the op's calls (non-blocking communicators may defer them).
  void await_enqueued(const Op& op);
  // Issues a plan's calls on buf (one NCCL group when there are several).
  void issue_plan(const std::vector<NcclCall>& plan, void* buf, ReduceOp rop, const Op& op);
  std::unique_ptr<Work> finish_issue(std::shared_ptr<Op> op);
  void check_usable() const;
  std::string timed_out_text(const Op& op) const;

  MPI_Comm mpi_comm_ = MPI_COMM_NULL;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t compute_stream_ = nullptr;  // null: the legacy default stream
  cudaEvent_t compute_ready_ = nullptr;    // recorded on compute_stream_ at each issue
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  CommOptions options_;
  float* scratch_ = nullptr;                  // one device float for barrier()
  std::vector<cudaEvent_t> free_events_;      // reused: no allocation per operation
  std::vector<void*> device_allocations_;     // from allocate(), freed with the communicator
  std::vector<std::shared_ptr<Op>> pending_;  // in issue order
  std::string broken_;
};

void OpError::operator()(const char* call, const char* error) const {
  comm->fail(*op, std::string("failed: ") + call + ": " + error);
}

bool NcclWork::test() {
  if (!op_->done) comm_->advance();
  return op_->done;
}

void NcclWork::wait() {
  comm_->wait_for(*op_);
}

NcclCommunicator::NcclCommunicator(MPI_Comm comm, CommOptions options, NcclOptions nccl_options)
    : options_(options) {
  // A constructor that throws runs no destructor: what it made so far goes here, or a caller
  // that survives the error (a test, a fallback to MPI) would keep a stream, an event, device
  // memory and a duplicated MPI communicator for nothing.
  try {
    init(comm, nccl_options);
  } catch (...) {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    release_resources();
    throw;
  }
}

void NcclCommunicator::init(MPI_Comm comm, const NcclOptions& nccl_options) {
  const detail::ThrowMpiError mpi_error{"make_nccl_communicator"};
  RM_MPI_CHECK(MPI_Comm_dup(comm, &mpi_comm_), mpi_error);
  RM_MPI_CHECK(MPI_Comm_set_errhandler(mpi_comm_, MPI_ERRORS_RETURN), mpi_error);
  RM_MPI_CHECK(MPI_Comm_rank(mpi_comm_, &rank_), mpi_error);
  RM_MPI_CHECK(MPI_Comm_size(mpi_comm_, &size_), mpi_error);
  const SetupError setup_error{rank_};
  // First, before any CUDA call: it needs no GPU, and a rank that cannot use its device should
  // not leave the others waiting for this broadcast.
  const ncclUniqueId id = share_unique_id();

  device_ = nccl_options.device;
  if (device_ < 0) {
    MPI_Comm node = MPI_COMM_NULL;
    RM_MPI_CHECK(MPI_Comm_split_type(mpi_comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                 mpi_error);
    RM_MPI_CHECK(MPI_Comm_rank(node, &device_), mpi_error);
    MPI_Comm_free(&node);
  }
  int devices = 0;
  RM_CUDA_CHECK(cudaGetDeviceCount(&devices), setup_error);
  if (device_ >= devices) {
    throw CollectiveError("[rank " + std::to_string(rank_) + "] make_nccl_communicator: device " +
                          std::to_string(device_) + " requested but only " +
                          std::to_string(devices) + " visible");
  }
  RM_CUDA_CHECK(cudaSetDevice(device_), setup_error);
  RM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), setup_error);
  compute_stream_ = static_cast<cudaStream_t>(nccl_options.compute_stream);
  RM_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming), setup_error);
  RM_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)), setup_error);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // Creation is an operation of its own (seq 0): it can time out like any other.
  Op init;
  static_cast<OpStamp&>(init) = stamp_op(0, "nccl_init", 0, options_.timeout_s);
  RM_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), (OpError{this, &init}));
  await_enqueued(init);
}

ncclUniqueId NcclCommunicator::share_unique_id() {
  // Rank 0's id, or why it has none, in one message: ncclGetUniqueId fails where NCCL finds no
  // network interface for its bootstrap (a wrong NCCL_SOCKET_IFNAME, say), and every rank
  // should then end naming that, not only rank 0 while the others wait for an id.
  struct Message {
    char failure[240] = {};  // empty: `id` is rank 0's
    ncclUniqueId id = {};
  };
  // On the heap, and left there if the wait times out: MPI may still write into it afterwards
  // (a broadcast cannot be cancelled), and the job is ending anyway.
  auto owned = std::make_unique<Message>();
  Message& message = *owned;
  if (rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&message.id);
    if (rc != ncclSuccess) {
      // NCCL's last error says what went wrong ("Bootstrap : no socket interface found"); the
      // code's text only says to look ("invalid usage (run with NCCL_DEBUG=WARN for details)").
      const char* last = ncclGetLastError(nullptr);
      std::snprintf(message.failure, sizeof(message.failure), "ncclGetUniqueId failed: %s",
                    last != nullptr && last[0] != '\0' ? last : ncclGetErrorString(rc));
    }
  }
  // Polled against the collective timeout, so that a rank 0 that never gets here ends the job.
  Op op;
  static_cast<OpStamp&>(op) = stamp_op(0, "nccl_unique_id", sizeof(message), options_.timeout_s);
  MPI_Request request = MPI_REQUEST_NULL;
  const int started = MPI_Ibcast(&message, sizeof(message), MPI_BYTE, 0, mpi_comm_, &request);
  if (started != MPI_SUCCESS) fail(op, "failed: MPI_Ibcast: " + detail::mpi_error_string(started));
  for (int done = 0; !done;) {
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) fail(op, "failed: MPI_Test: " + detail::mpi_error_string(rc));
    if (!done && Clock::now() > op.deadline) {
      (void)owned.release();
      fail(op, timed_out_text(op) + " waiting for rank 0's NCCL id");
    }
    if (!done) sched_yield();
  }
  if (message.failure[0] != '\0') {
    fail(op, std::string("failed: rank 0 could not start NCCL: ") + message.failure);
  }
  return message.id;
}

NcclCommunicator::~NcclCommunicator() {
  if (broken_.empty()) {
    try {
      while (!pending_.empty()) {
        const std::shared_ptr<Op> last = pending_.back();  // completing drops pending_'s copy
        wait_for(*last);
      }
      Op finalize;
      static_cast<OpStamp&>(finalize) = stamp_op(0, "nccl_finalize", 0, options_.timeout_s);
      // Non-blocking: flushes outstanding work. A finalize refused at once aborts instead of
      // going on to ncclCommDestroy, which would finalize again itself with no time limit.
      const ncclResult_t finalizing = ncclCommFinalize(comm_);
      if (finalizing != ncclSuccess && finalizing != ncclInProgress) {
        fail(finalize, std::string("failed: ") + ncclGetErrorString(finalizing));
      }
      await_enqueued(finalize);
      ncclCommDestroy(comm_);
    } catch (const CollectiveError&) {
      // reported, and the communicator aborted
    }
  }
  release_resources();
}

void NcclCommunicator::release_resources() {
  for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
  free_events_.clear();
  if (compute_ready_ != nullptr) cudaEventDestroy(compute_ready_);
  compute_ready_ = nullptr;
  for (void* memory : device_allocations_) cudaFree(memory);
  device_allocations_.clear();
  if (scratch_ != nullptr) cudaFree(scratch_);
  scratch_ = nullptr;
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
  // After a failure a peer may never free its side: freeing is then left to MPI_Finalize.
  if (broken_.empty() && mpi_comm_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_comm_);
}

void* NcclCommunicator::allocate(size_t bytes) {
  check_usable();
  // Plain device memory: NCCL needs nothing more for in-place collectives. (ncclMemAlloc plus
  // ncclCommRegister would enable NVLS / zero-copy paths on hardware that has them.)
  const SetupError on_error{rank_};
  void* memory = nullptr;
  RM_CUDA_CHECK(cudaMalloc(&memory, std::max<size_t>(bytes, 1)), on_error);
  device_allocations_.push_back(memory);
  // Zeroed on our stream (after what it and the compute stream have queued) and waited for as an
  // operation, so that no stream sees the memory unset: within the timeout, ending the job like
  // any collective, where cudaDeviceSynchronize would wait without one for every stream, a
  // collective a stalled peer never lets finish included.
  const std::shared_ptr<Op> op = new_op("allocate", bytes);
  RM_CUDA_CHECK(cudaMemsetAsync(memory, 0, bytes, stream_), (OpError{this, op.get()}));
  finish_issue(op);
  wait_for(*op);
  return memory;
}

std::shared_ptr<Op> NcclCommunicator::new_op(const char* name, size_t bytes) {
  auto op = std::make_shared<Op>();
  static_cast<OpStamp&>(*op) = stamp_op(next_sequence(), name, bytes, options_.timeout_s);
  if (free_events_.empty()) {
    cudaEvent_t event = nullptr;
    RM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                  (OpError{this, op.get()}));
    free_events_.push_back(event);
  }
  op->event = free_events_.back();
  free_events_.pop_back();
  // The operation reads what the compute stream has queued so far.
  RM_CUDA_CHECK(cudaEventRecord(compute_ready_, compute_stream_), (OpError{this, op.get()}));
  RM_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_ready_, 0), (OpError{this, op.get()}));
  return op;
}

void NcclCommunicator::check_usable() const {
  if (!broken_.empty()) {
    throw CollectiveError("[rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
                          "] communicator unusable after an earlier failure: " + broken_);
  }
}

std::string NcclCommunicator::timed_out_text(const Op& op) const {
  char text[64];
  std::snprintf(text, sizeof(text), "timed out after %.1f s",
                std::chrono::duration<double>(Clock::now() - op.issued).count());
  return text;
}

void NcclCommunicator::await_enqueued(const Op& op) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    RM_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state), (OpError{this, &op}));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(op, std::string("failed: ") + ncclGetErrorString(state));
    if (Clock::now() > op.deadline) fail(op, timed_out_text(op) + " (NCCL still enqueuing)");
    sched_yield();
  }
}

std::unique_ptr<Work> NcclCommunicator::finish_issue(std::shared_ptr<Op> op) {
  await_enqueued(*op);
  RM_CUDA_CHECK(cudaEventRecord(op->event, stream_), (OpError{this, op.get()}));
  pending_.push_back(op);
  activity_.set_oldest(pending_.front().get());
  return std::make_unique<NcclWork>(this, std::move(op));
}

void NcclCommunicator::issue_plan(const std::vector<NcclCall>& plan, void* buf, ReduceOp rop,
                                  const Op& op) {
  const OpError on_error{this, &op};
  char* base = static_cast<char*>(buf);
  const bool group = plan.size() > 1;
  if (group) RM_NCCL_CHECK(ncclGroupStart(), on_error);
  for (const NcclCall& c : plan) {
    char* send = base + c.send_offset;
    char* recv = base + c.recv_offset;
    const ncclDataType_t type = to_nccl(c.type);
    switch (c.kind) {
      case NcclCallKind::kAllReduce:
        RM_NCCL_CHECK(ncclAllReduce(send, recv, c.count, type, to_nccl(rop), comm_, stream_),
                      on_error);
        break;
      case NcclCallKind::kReduceScatter:
        RM_NCCL_CHECK(ncclReduceScatter(send, recv, c.count, type, to_nccl(rop), comm_, stream_),
                      on_error);
        break;
      case NcclCallKind::kAllGather:
        RM_NCCL_CHECK(ncclAllGather(send, recv, c.count, type, comm_, stream_), on_error);
        break;
      case NcclCallKind::kReduce:
        RM_NCCL_CHECK(ncclReduce(send, recv, c.count, type, to_nccl(rop), c.root, comm_, stream_),
                      on_error);
        break;
      case NcclCallKind::kBroadcast:
        RM_NCCL_CHECK(ncclBroadcast(send, recv, c.count, type, c.root, comm_, stream_), on_error);
        break;
    }
  }
  if (group) RM_NCCL_CHECK(ncclGroupEnd(), on_error);
}

std::unique_ptr<Work> NcclCommunicator::all_reduce(void* buf, size_t count, DType dtype,
                                                   ReduceOp rop) {
  check_usable();
  auto op = new_op("all_reduce", count * dtype_size(dtype));
  issue_plan(plan_all_reduce(count, dtype), buf, rop, *op);
  return finish_issue(std::move(op));
}

std::unique_ptr<Work> NcclCommunicator::reduce_scatter(void* buf, const std::vector<size_t>& counts,
                                                       DType dtype, ReduceOp rop) {
  check_usable();
  check_shard_counts(counts, size_);
  auto op = new_op("reduce_scatter", shard_offset(counts, size_) * dtype_size(dtype));
  issue_plan(plan_reduce_scatter(counts, rank_, dtype), buf, rop, *op);
  return finish_issue(std::move(op));
}

std::unique_ptr<Work> NcclCommunicator::all_gather(void* buf, const std::vector<size_t>& counts,
                                                   DType dtype) {
  check_usable();
  check_shard_counts(counts, size_);
  auto op = new_op("all_gather", shard_offset(counts, size_) * dtype_size(dtype));
  issue_plan(plan_all_gather(counts, rank_, dtype), buf, ReduceOp::kSum, *op);
  return finish_issue(std::move(op));
}

std::unique_ptr<Work> NcclCommunicator::broadcast(void* buf, size_t count, DType dtype, int root) {
  check_usable();
  check_root(root, size_);
  auto op = new_op("broadcast", count * dtype_size(dtype));
  issue_plan(plan_broadcast(count, dtype, root), buf, ReduceOp::kSum, *op);
  return finish_issue(std::move(op));
}

void NcclCommunicator::barrier() {
  check_usable();
  auto op = new_op("barrier", 0);
  RM_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_),
                (OpError{this, op.get()}));
  // The stream runs operations in order: this one completing means all earlier ones did.
  finish_issue(op);
  wait_for(*op);
}

void NcclCommunicator::advance() {
  check_usable();
  // The stream completes operations in issue order: stop at the first one still running.
  size_t completed = 0;
  for (; completed < pending_.size(); ++completed) {
    Op& op = *pending_[completed];
    const cudaError_t state = cudaEventQuery(op.event);
    if (state == cudaErrorNotReady) break;
    RM_CUDA_CHECK(state, (OpError{this, &op}));
    op.done = true;
    free_events_.push_back(op.event);
    op.event = nullptr;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(completed));
  if (completed > 0) {
    activity_.note_progress();
    activity_.set_oldest(pending_.empty() ? nullptr : pending_.front().get());
  }
  if (pending_.empty()) return;
  const Op& head = *pending_.front();
  // A peer's failure (or a network error) surfaces as an asynchronous error of the communicator.
  ncclResult_t async = ncclSuccess;
  RM_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async), (OpError{this, &head}));
  if (async != ncclSuccess && async != ncclInProgress) {
    fail(head, std::string("failed: ") + ncclGetErrorString(async));
  }
  if (Clock::now() > head.deadline) fail(head, timed_out_text(head));
}

void NcclCommunicator::wait_for(const Op& op) {
  const CommActivity::Blocked blocked(activity_);
  while (!op.done) {
    advance();
    if (!op.done) sched_yield();  // the GPU does the work; leave the core to others
  }
}

void NcclCommunicator::fail(const Op& op, const std::string& what) {
  const std::string msg =
      describe_op(rank_, size_, op.name, op.seq, op.bytes, options_.timeout_s) + " " + what;
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  // Abort the NCCL communicator first: its kernels stop waiting for peers, and peers' pending
  // operations fail instead of hanging.
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  broken_ = msg;
  if (options_.abort_on_error) {
    MPI_Abort(mpi_comm_, 1);
    std::abort();
  }
  throw CollectiveError(msg);
}

void NcclCommunicator::abort(const std::string& why, int exit_code) {
  std::fprintf(stderr, "[rank %d/%d] aborting: %s\n", rank_, size_, why.c_str());
  std::fflush(stderr);
  if (comm_ != nullptr) ncclCommAbort(comm_);
  MPI_Abort(mpi_comm_, exit_code);
  std::abort();
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, CommOptions options,
                                                     NcclOptions nccl_options) {
  return std::make_unique<NcclCommunicator>(comm, options, nccl_options);
}

}  // namespace rm

#include "collectives/mpi/hier_path.h"

#include <unistd.h>

#include <climits>
#include <cstring>

#include "collectives/mpi/host_blocks.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/reduce_kernels.h"

namespace rm::detail {
namespace {

std::vector<int> to_ints(const std::vector<size_t>& v) {
  std::vector<int> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] > static_cast<size_t>(INT_MAX)) {
      throw CollectiveError("hierarchical path: more than INT_MAX elements on one rail");
    }
    out[i] = static_cast<int>(v[i]);
  }
  return out;
}

// An in-host reduction: a sum (an average is divided once, after the inter-host step) that
// announces what the caller asked for, so that ranks of a host that disagree are caught.
ShmTask in_host_sum(ShmKind kind, char* buf, DType dtype, std::vector<size_t> counts, bool avg) {
  return {
      kind, buf, dtype, ReduceOp::kSum, std::move(counts), avg ? ReduceOp::kAvg : ReduceOp::kSum};
}

// Where each part starts when parts of `counts` elements lie back to back.
std::vector<size_t> offsets(const std::vector<size_t>& counts) {
  std::vector<size_t> out(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) out[i] = out[i - 1] + counts[i - 1];
  return out;
}

}  // namespace

std::unique_ptr<HierPath> HierPath::make(MPI_Comm comm, size_t slot_bytes, HierLayout layout) {
  const ThrowMpiError on_error{"hierarchical path setup"};
  int rank = 0, size = 1;
  RM_MPI_CHECK(MPI_Comm_rank(comm, &rank), on_error);
  RM_MPI_CHECK(MPI_Comm_size(comm, &size), on_error);
  MPI_Comm node = MPI_COMM_NULL;
  RM_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), on_error);
  int local = 0, local_size = 1;
  RM_MPI_CHECK(MPI_Comm_rank(node, &local), on_error);
  RM_MPI_CHECK(MPI_Comm_size(node, &local_size), on_error);
  // Host after host, the same number on each: decided from every rank's view, so that all agree
  // (each rank's own view can look right on hosts of different sizes: host_blocks.h).
  std::vector<LocalView> views(static_cast<size_t>(size));
  const LocalView mine{local, local_size};
  RM_MPI_CHECK(
      MPI_Allgather(&mine, sizeof mine, MPI_BYTE, views.data(), sizeof mine, MPI_BYTE, comm),
      on_error);
  if (!hosts_in_equal_blocks(views)) {
    MPI_Comm_free(&node);
    return nullptr;
  }
  std::unique_ptr<HierPath> p(new HierPath);
  p->node_ = node;
  p->layout_ = layout;
  p->rank_ = rank;
  p->size_ = size;
  p->local_ = local;
  p->local_size_ = local_size;
  p->hosts_ = size / local_size;
  p->host_ = rank / local_size;
  RM_MPI_CHECK(MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN), on_error);
  // Rails: local rank j of every host, in host order. Rail 0 is also the hosts' leaders.
  RM_MPI_CHECK(MPI_Comm_split(comm, local, rank, &p->rail_), on_error);
  RM_MPI_CHECK(MPI_Comm_set_errhandler(p->rail_, MPI_ERRORS_RETURN), on_error);
  RM_MPI_CHECK(MPI_Comm_dup(p->rail_, &p->rail_gather_), on_error);
  // Host names, for messages that name the host a missing rank is on.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  ::gethostname(name, sizeof name - 1);
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  RM_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                             MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm),
               on_error);
  for (int h = 0; h < p->hosts_; ++h) {
    p->host_names_.emplace_back(&all[static_cast<size_t>(h * local_size) * MPI_MAX_PROCESSOR_NAME]);
  }
  p->in_ = std::make_unique<ShmEngine>(node, slot_bytes, p->host_ * local_size, size);
  p->out_ = std::make_unique<ShmEngine>(node, slot_bytes, p->host_ * local_size, size);
  return p;
}

HierPath::~HierPath() {
  in_.reset();
  out_.reset();
  if (rail_gather_ != MPI_COMM_NULL) MPI_Comm_free(&rail_gather_);
  if (rail_ != MPI_COMM_NULL) MPI_Comm_free(&rail_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

MPI_Datatype HierPath::mpi_type(DType dtype) const {
  // bf16 only moves here (all-gather): as 2-byte words.
  return dtype == DType::kFloat64 ? MPI_DOUBLE : dtype == DType::kBFloat16 ? MPI_UINT16_T : MPI_FLOAT;
}

// A reduction on the rail: every host's part `counts[h]` of the rail's elements sits at
// `displs[h]` from `base`; this rank (host_ on the rail) receives every host's copy of its part.
void HierPath::plan_exchange(HierOp& op, char* base, std::vector<size_t> counts,
                             std::vector<size_t> displs, bool avg) {
  const size_t own = counts[static_cast<size_t>(host_)];
  op.rail_buf = base;
  op.rail_counts = to_ints(counts);
  op.rail_displs = to_ints(displs);
  op.recv_counts.assign(static_cast<size_t>(hosts_), to_ints({own})[0]);
  std::vector<size_t> recv_displs;
  for (int h = 0; h < hosts_; ++h) recv_displs.push_back(own * static_cast<size_t>(h));
  op.recv_displs = to_ints(recv_displs);
  op.reduce_to = base + displs[static_cast<size_t>(host_)] * dtype_size(op.dtype);
  op.reduce_count = own;
  op.avg = avg;
}

void HierPath::queue(std::shared_ptr<HierOp> op) {
  if (!op->in_tasks.empty()) in_q_.push_back(op);
  if (op->rail != HierOp::Rail::kNone) rail_q_.push_back(op);
  if (!op->out_tasks.empty()) out_q_.push_back(op);
  if (op->in_tasks.empty() && op->rail == HierOp::Rail::kNone && op->out_tasks.empty()) {
    op->done = true;
  }
}

void HierPath::all_reduce(std::shared_ptr<HierOp> op, char* buf, size_t count, DType dtype,
                          bool avg) {
  op->dtype = dtype;
  const size_t esize = dtype_size(dtype);
  if (layout_ == HierLayout::kLeaders) {
    op->in_tasks.push_back(
        in_host_sum(ShmKind::kAllReduce, buf, dtype, shard_counts(count, local_size_), avg));
    if (local_ == 0) {
      op->rail = HierOp::Rail::kAllReduce;
      const std::vector<size_t> parts = shard_counts(count, hosts_);
      plan_exchange(*op, buf, parts, offsets(parts), avg);
    }
    std::vector<size_t> from_leader(static_cast<size_t>(local_size_), 0);
    from_leader[0] = count;
    op->out_tasks.push_back({ShmKind::kAllGather, buf, dtype, ReduceOp::kSum, from_leader});
  } else {
    const std::vector<size_t> slices = shard_counts(count, local_size_);
    char* mine = buf + shard_offset(slices, local_) * esize;
    op->in_tasks.push_back(in_host_sum(ShmKind::kReduceScatter, buf, dtype, slices, avg));
    op->rail = HierOp::Rail::kAllReduce;
    const std::vector<size_t> parts = shard_counts(slices[static_cast<size_t>(local_)], hosts_);
    plan_exchange(*op, mine, parts, offsets(parts), avg);
    op->out_tasks.push_back({ShmKind::kAllGather, buf, dtype, ReduceOp::kSum, slices});
  }
  queue(std::move(op));
}

void HierPath::reduce_scatter(std::shared_ptr<HierOp> op, char* buf,
                              const std::vector<size_t>& counts, DType dtype, bool avg) {
  // Both layouts: rails are what a reduce-scatter needs (each rank's shard leaves its host once).
  op->dtype = dtype;
  const size_t esize = dtype_size(dtype);
  const auto L = static_cast<size_t>(local_size_);
  std::vector<size_t> rail_counts, rail_displs;
  for (int h = 0; h < hosts_; ++h) {
    const auto first = counts.begin() + static_cast<long>(h * L);
    std::vector<size_t> block(first, first + static_cast<long>(L));
    op->in_tasks.push_back(in_host_sum(ShmKind::kReduceScatter,
                                       buf + shard_offset(counts, h * local_size_) * esize, dtype,
                                       block, avg));
    rail_counts.push_back(block[static_cast<size_t>(local_)]);
    rail_displs.push_back(shard_offset(counts, global_rank(h, local_)));
  }
  op->rail = HierOp::Rail::kReduceScatter;
  plan_exchange(*op, buf, rail_counts, rail_displs, avg);
  queue(std::move(op));
}

void HierPath::all_gather(std::shared_ptr<HierOp> op, char* buf, const std::vector<size_t>& counts,
                          DType dtype) {
  op->dtype = dtype;
  const size_t esize = dtype_size(dtype);
  const auto L = static_cast<size_t>(local_size_);
  std::vector<size_t> rail_counts;
  op->rail = HierOp::Rail::kAllGather;
  op->rail_buf = buf;
  for (int h = 0; h < hosts_; ++h) {
    rail_counts.push_back(counts[static_cast<size_t>(global_rank(h, local_))]);
    op->rail_displs.push_back(static_cast<int>(shard_offset(counts, global_rank(h, local_))));
    const auto first = counts.begin() + static_cast<long>(h * L);
    op->out_tasks.push_back({ShmKind::kAllGather, buf + shard_offset(counts, h * local_size_) * esize,
                             dtype, ReduceOp::kSum, std::vector<size_t>(first, first + static_cast<long>(L))});
  }
  op->rail_counts = to_ints(rail_counts);
  queue(std::move(op));
}

void HierPath::issue_rail(HierOp& op) {
  const auto fail = [&](const char* call, int code) {
    throw HierFailure{op.owner, std::string("failed: ") + call + ": " + mpi_error_string(code)};
  };
  const MPI_Datatype type = mpi_type(op.dtype);
  if (op.rail == HierOp::Rail::kAllGather) {
    RM_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op.rail_buf,
                                 op.rail_counts.data(), op.rail_displs.data(), type, rail_,
                                 &op.request),
                 fail);
  } else {
    // Per operation, like the temporaries MPI's own reductions allocate.
    op.scratch.resize(op.reduce_count * static_cast<size_t>(hosts_) * dtype_size(op.dtype));
    RM_MPI_CHECK(MPI_Ialltoallv(op.rail_buf, op.rail_counts.data(), op.rail_displs.data(), type,
                                op.scratch.data(), op.recv_counts.data(), op.recv_displs.data(),
                                type, rail_, &op.request),
                 fail);
  }
  op.rail_issued = true;
}

void HierPath::reduce_exchanged(HierOp& op) {
  const size_t esize = dtype_size(op.dtype);
  if (op.reduce_count > 0) {
    std::vector<const void*> srcs;
    for (int h = 0; h < hosts_; ++h) {
      srcs.push_back(op.scratch.data() + static_cast<size_t>(h) * op.reduce_count * esize);
    }
    void* dst = op.reduce_to;
    reduce_sources(op.dtype, ReduceOp::kSum, hosts_, srcs.data(), op.reduce_count, 1, &dst);
    if (op.avg) divide_in_place(op.dtype, op.reduce_to, op.reduce_count, size_);
  }
  std::vector<char>().swap(op.scratch);
  op.exchanged = true;
}

void HierPath::issue_gather(HierOp& op) {
  RM_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op.rail_buf,
                               op.rail_counts.data(), op.rail_displs.data(), mpi_type(op.dtype),
                               rail_gather_, &op.request),
               ([&](const char* call, int code) {
                 throw HierFailure{op.owner, std::string("failed: ") + call + ": " +
                                                 mpi_error_string(code)};
               }));
  op.gather_issued = true;
}

// Runs the head op's tasks on `engine` in order; an out-stage head waits for its op's earlier
// stages. Returns whether anything moved.
bool HierPath::advance_engine(ShmEngine& engine, std::deque<std::shared_ptr<HierOp>>& q, bool in) {
  bool moved = false;
  while (!q.empty()) {
    HierOp& op = *q.front();
    std::vector<ShmTask>& tasks = in ? op.in_tasks : op.out_tasks;
    size_t& next = in ? op.in_next : op.out_next;
    bool& started = in ? op.in_started : op.out_started;
    if (!in) {
      const bool earlier_done =
          op.rail != HierOp::Rail::kNone ? op.rail_done : op.in_next == op.in_tasks.size();
      if (!earlier_done) break;
    }
    if (!started) {
      engine.start(std::move(tasks[next]));
      started = true;
      moved = true;
    }
    const uint64_t before = engine.phase();
    const bool finished = engine.advance();
    moved = moved || engine.phase() != before;
    if (!engine.error().empty()) throw HierFailure{op.owner, "failed: " + engine.error()};
    if (!finished) break;
    started = false;
    if (++next < tasks.size()) continue;
    if (!in || op.rail == HierOp::Rail::kNone) op.done = op.out_next == op.out_tasks.size();
    q.pop_front();
  }
  return moved;
}

bool HierPath::advance() {
  bool moved = advance_engine(*in_, in_q_, true);
  // Rails: issue in issue order once the op's in-host stage is done; complete in any order.
  for (auto& op : rail_q_) {
    if (op->rail_issued) continue;
    if (op->in_next < op->in_tasks.size()) break;
    issue_rail(*op);
    moved = true;
  }
  // All-reduces' all-gathers: in issue order once their exchange is reduced (ranks finish
  // exchanges at different times, so the order comes from the queue, not the clock).
  for (auto& op : rail_q_) {
    if (op->rail != HierOp::Rail::kAllReduce || op->gather_issued) continue;
    if (!op->exchanged) break;
    issue_gather(*op);
    moved = true;
  }
  for (auto it = rail_q_.begin(); it != rail_q_.end();) {
    HierOp& op = **it;
    if (!op.rail_issued) break;
    int flag = 0;
    if (op.request != MPI_REQUEST_NULL) {
      RM_MPI_CHECK(MPI_Test(&op.request, &flag, MPI_STATUS_IGNORE),
                   ([&](const char* call, int code) {
                     throw HierFailure{op.owner, std::string("failed: ") + call + ": " +
                                                     mpi_error_string(code)};
                   }));
    }
    if (!flag) {
      ++it;
      continue;
    }
    moved = true;
    if (op.rail != HierOp::Rail::kAllGather && !op.exchanged) {
      reduce_exchanged(op);
      if (op.rail == HierOp::Rail::kAllReduce) {
        ++it;  // its all-gather is issued in order, above
        continue;
      }
    }
    op.rail_done = true;
    if (op.out_tasks.empty()) op.done = true;
    it = rail_q_.erase(it);
  }
  moved = advance_engine(*out_, out_q_, false) || moved;
  return moved;
}

void HierPath::block(long max_us) {
  if (!in_->idle() && in_->blocking_peer() >= 0) {
    in_->block(max_us);
  } else if (!out_->idle() && out_->blocking_peer() >= 0) {
    out_->block(max_us);
  }
}

bool HierPath::waits_for_peer_on(int cpu) const {
  return (!in_->idle() && in_->waits_for_peer_on(cpu)) ||
         (!out_->idle() && out_->waits_for_peer_on(cpu));
}

std::string HierPath::waiting_for(const HierOp& op) const {
  const auto local_peer = [&](const ShmEngine& e) {
    const int peer = e.blocking_peer();
    if (peer < 0) return std::string("local ranks of host ") + host_names_[static_cast<size_t>(host_)];
    return "rank " + std::to_string(global_rank(host_, peer)) + " on host " +
           host_names_[static_cast<size_t>(host_)] + " (shared memory)";
  };
  if (op.in_next < op.in_tasks.size()) return "waiting for " + local_peer(*in_) + ", in-host reduction";
  if (op.rail != HierOp::Rail::kNone && !op.rail_done) {
    std::string peers;
    for (int h = 0; h < hosts_; ++h) {
      if (h == host_) continue;
      // Rail local_ in both layouts: the leaders' all-reduce runs on rail 0 (local_ is 0 there),
      // every rank's reduce-scatter and all-gather on its own rail.
      const int peer = global_rank(h, local_);
      peers += (peers.empty() ? "" : ", ") + std::to_string(peer) + " on " +
               host_names_[static_cast<size_t>(h)];
    }
    return "waiting for the network: the inter-host step with rank" +
           std::string(hosts_ > 2 ? "s " : " ") + peers +
           " is incomplete (MPI does not say which of them is missing)";
  }
  return "waiting for " + local_peer(*out_) + ", in-host gather";
}

int HierPath::failed_peer() const {
  int peer = in_->failed_peer();
  if (peer < 0) peer = out_->failed_peer();
  return peer < 0 ? -1 : global_rank(host_, peer);
}

void HierPath::poison() {
  in_->poison();
  out_->poison();
}

}  // namespace rm::detail

#include "testing/order_checking_communicator.h"

#include <numeric>
#include <utility>

namespace rm {
namespace {

// The inner operation's Work; ends the ledger's record once the host has seen it complete.
class CheckedWork final : public Work {
 public:
  CheckedWork(std::unique_ptr<Work> inner, OrderLedger& ledger, uint64_t id, int lag)
      : inner_(std::move(inner)), ledger_(ledger), id_(id), lag_(lag) {}

  bool test() override {
    const bool done = inner_->test();  // drives the communicator even while lagging
    if (lag_ > 0) {
      --lag_;
      return false;
    }
    if (done) ledger_.end_collective(id_);
    return done;
  }
  void wait() override {
    inner_->wait();
    ledger_.end_collective(id_);
  }

 private:
  std::unique_ptr<Work> inner_;
  OrderLedger& ledger_;
  uint64_t id_;
  int lag_;  // test() calls still to answer "not yet"
};

size_t total(const std::vector<size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

}  // namespace

void* OrderCheckingCommunicator::allocate(size_t bytes) {
  void* p = inner_.allocate(bytes);
  ledger_.name_memory(p, bytes, "comm.allocate#" + std::to_string(++allocations_));
  return p;
}

template <typename Issue>
std::unique_ptr<Work> OrderCheckingCommunicator::checked(const char* name, void* buf, size_t bytes,
                                                         Issue issue) {
  const uint64_t seq = next_sequence();
  const uint64_t id =
      ledger_.begin_collective(std::string(name) + "(seq=" + std::to_string(seq) + ")", buf, bytes);
  std::unique_ptr<Work> work;
  try {
    work = issue();
  } catch (...) {
    ledger_.end_collective(id);  // never issued
    throw;
  }
  return std::make_unique<CheckedWork>(std::move(work), ledger_, id, test_lag_);
}

std::unique_ptr<Work> OrderCheckingCommunicator::all_reduce(void* buf, size_t count, DType dtype,
                                                            ReduceOp op) {
  return checked("all_reduce", buf, count * dtype_size(dtype),
                 [&] { return inner_.all_reduce(buf, count, dtype, op); });
}

std::unique_ptr<Work> OrderCheckingCommunicator::reduce_scatter(void* buf,
                                                                const std::vector<size_t>& counts,
                                                                DType dtype, ReduceOp op) {
  return checked("reduce_scatter", buf, total(counts) * dtype_size(dtype),
                 [&] { return inner_.reduce_scatter(buf, counts, dtype, op); });
}

std::unique_ptr<Work> OrderCheckingCommunicator::all_gather(void* buf,
                                                            const std::vector<size_t>& counts,
                                                            DType dtype) {
  return checked("all_gather", buf, total(counts) * dtype_size(dtype),
                 [&] { return inner_.all_gather(buf, counts, dtype); });
}

std::unique_ptr<Work> OrderCheckingCommunicator::broadcast(void* buf, size_t count, DType dtype,
                                                           int root) {
  return checked("broadcast", buf, count * dtype_size(dtype),
                 [&] { return inner_.broadcast(buf, count, dtype, root); });
}

void OrderCheckingCommunicator::barrier() {
  next_sequence();
  inner_.barrier();
  ledger_.end_all_collectives();  // a barrier returns after every earlier operation completed
}

}  // namespace rm

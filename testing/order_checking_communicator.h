// A Communicator that forwards to a real one (mpi, self) and tells an OrderLedger
// (testing/order_ledger.h) which bytes each collective uses, from issue until the host observes its
// completion: Work::test() returning true, Work::wait() returning, or a barrier. That is the
// window in which, on the nccl path, the operation runs beside later compute calls. The range is
// the whole buffer the operation works in place on:
//   all_reduce, broadcast: count elements; reduce_scatter, all_gather: sum(counts) elements.
// Issuing an operation on the source of a download that is not fenced yet is itself reported.
//
// allocate() forwards (the buffers of the operations must come from the real communicator) and
// names each block in the ledger ("comm.allocate#2"). A Work dropped without being observed
// keeps its range in flight: the host never learnt that it finished.
//
// test_lag > 0: each Work's test() answers false that many times (still driving the real one)
// before it reports the real state, as a GPU collective still running would. Completion on the
// host then comes later than the shared-memory engine would make it, so more compute calls fall
// inside each operation's window; wait() is unchanged. Any lag is legal (test() may always say
// "not yet"), and with different lags per rank a client whose issue order depended on when
// operations complete would hang or mismatch.
//
// Same threading as any communicator: the owning thread makes every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "testing/order_ledger.h"

namespace rm {

class OrderCheckingCommunicator final : public Communicator {
 public:
  // `inner` and the ledger must outlive this object and every Work it returns.
  OrderCheckingCommunicator(Communicator& inner, OrderLedger& ledger, int test_lag = 0)
      : inner_(inner), ledger_(ledger), test_lag_(test_lag) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  void* allocate(size_t bytes) override;

  std::unique_ptr<Work> all_reduce(void* buf, size_t count, DType dtype, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter(void* buf, const std::vector<size_t>& counts, DType dtype,
                                       ReduceOp op) override;
  std::unique_ptr<Work> all_gather(void* buf, const std::vector<size_t>& counts,
                                   DType dtype) override;
  std::unique_ptr<Work> broadcast(void* buf, size_t count, DType dtype, int root) override;
  void barrier() override;
  void progress() override { inner_.progress(); }
  [[noreturn]] void abort(const std::string& why, int exit_code = 1) override {
    inner_.abort(why, exit_code);
    std::abort();  // unreachable: GCC does not carry [[noreturn]] through the virtual call
  }
  uint64_t share_liveness(uint64_t beats) override { return inner_.share_liveness(beats); }

 private:
  // Records the operation in the ledger, issues it through `issue` and wraps its Work.
  template <typename Issue>
  std::unique_ptr<Work> checked(const char* name, void* buf, size_t bytes, Issue issue);

  Communicator& inner_;
  OrderLedger& ledger_;
  int test_lag_;
  int allocations_ = 0;
};

}  // namespace rm

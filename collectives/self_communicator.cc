#include "collectives/self_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

namespace rm {
namespace {

class DoneWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};

class SelfCommunicator final : public Communicator {
 public:
  explicit SelfCommunicator(SelfMemory memory) : memory_(std::move(memory)) {}
  ~SelfCommunicator() override {
    for (void* block : blocks_) memory_.release(block);
  }

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  void* allocate(size_t bytes) override {
    if (!memory_.allocate) return Communicator::allocate(bytes);
    blocks_.reserve(blocks_.size() + 1);  // so that a block, once allocated, is never leaked
    void* block = memory_.allocate(bytes);
    blocks_.push_back(block);
    return block;
  }

  std::unique_ptr<Work> all_reduce(void*, size_t, DType, ReduceOp) override { return done(); }
  std::unique_ptr<Work> reduce_scatter(void*, const std::vector<size_t>& counts, DType,
                                       ReduceOp) override {
    check_shard_counts(counts, 1);
    return done();
  }
  std::unique_ptr<Work> all_gather(void*, const std::vector<size_t>& counts, DType) override {
    check_shard_counts(counts, 1);
    return done();
  }
  std::unique_ptr<Work> broadcast(void*, size_t, DType, int root) override {
    check_root(root, 1);
    return done();
  }
  void barrier() override { next_sequence(); }
  void progress() override {}
  [[noreturn]] void abort(const std::string& why, int exit_code = 1) override {
    std::fprintf(stderr, "[rank 0/1] abort: %s\n", why.c_str());
    std::exit(exit_code);
  }

 private:
  std::unique_ptr<Work> done() {
    next_sequence();
    return std::make_unique<DoneWork>();
  }

  SelfMemory memory_;
  std::vector<void*> blocks_;  // from memory_.allocate, released at destruction
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator(SelfMemory memory) {
  if (static_cast<bool>(memory.allocate) != static_cast<bool>(memory.release)) {
    throw std::invalid_argument(
        "make_self_communicator: SelfMemory needs both allocate and release");
  }
  return std::make_unique<SelfCommunicator>(std::move(memory));
}

}  // namespace rm

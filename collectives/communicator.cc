#include "collectives/communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace rm {

Work::~Work() = default;
Communicator::~Communicator() = default;

uint64_t Communicator::share_liveness(uint64_t) {
  return 0;
}

namespace {
class NoPeerWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

std::unique_ptr<Work> Communicator::send(const void*, size_t, int to) {
  if (to < 0) return std::make_unique<NoPeerWork>();
  throw CollectiveError("backend " + backend() + " has no point-to-point send (to rank " +
                        std::to_string(to) + ")");
}

std::unique_ptr<Work> Communicator::recv(void*, size_t, int from) {
  if (from < 0) return std::make_unique<NoPeerWork>();
  throw CollectiveError("backend " + backend() + " has no point-to-point receive (from rank " +
                        std::to_string(from) + ")");
}

// A seqlock (one writer): the version is odd while the fields change. The reader's acquire fence
// orders its field loads before the second version load; the writer's release fence orders the
// odd version before its field stores.
void CommActivity::set_oldest(const OpStamp* op) {
  const uint64_t seq = op != nullptr ? op->seq : 0;
  if (seq == seq_.load(std::memory_order_relaxed)) return;  // only this thread writes it
  const uint32_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  seq_.store(seq, std::memory_order_relaxed);
  name_.store(op != nullptr ? op->name : "", std::memory_order_relaxed);
  bytes_.store(op != nullptr ? op->bytes : 0, std::memory_order_relaxed);
  issued_ns_.store(op != nullptr ? std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       op->issued.time_since_epoch())
                                       .count()
                                 : 0,
                   std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
}

void CommActivity::set_blocked(bool blocked) {
  if (!blocked) peer_.store(-1, std::memory_order_relaxed);
  blocked_.store(blocked, std::memory_order_relaxed);
}

void CommActivity::set_peer(int peer) {
  if (peer_.load(std::memory_order_relaxed) != peer) peer_.store(peer, std::memory_order_relaxed);
}

CommActivity::Snapshot CommActivity::snapshot() const {
  Snapshot s;
  for (;;) {
    const uint32_t v = version_.load(std::memory_order_acquire);
    if (v % 2 != 0) continue;  // the owner is writing: a few stores, retry at once
    s.seq = seq_.load(std::memory_order_relaxed);
    s.name = name_.load(std::memory_order_relaxed);
    s.bytes = bytes_.load(std::memory_order_relaxed);
    const int64_t ns = issued_ns_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) != v) continue;
    s.issued = std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::nanoseconds(ns)));
    break;
  }
  s.blocked = blocked_.load(std::memory_order_relaxed);
  s.peer = s.blocked ? peer_.load(std::memory_order_relaxed) : -1;
  return s;
}

void Communicator::Free::operator()(void* p) const {
  std::free(p);
}

void* Communicator::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  void* memory = std::aligned_alloc(4096, rounded);
  if (memory == nullptr) throw std::bad_alloc();
  allocations_.emplace_back(memory);
  std::memset(memory, 0, rounded);
  return memory;
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kBFloat16:
      return 2;
  }
  throw std::invalid_argument("dtype_size: unknown dtype");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kBFloat16:
      return "bfloat16";
  }
  throw std::invalid_argument("dtype_name: unknown dtype");
}

const char* reduce_op_name(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : "avg";
}

std::vector<size_t> shard_counts(size_t total, int world) {
  if (world < 1) throw std::invalid_argument("shard_counts: world must be >= 1");
  const size_t n = static_cast<size_t>(world);
  std::vector<size_t> counts(n, total / n);
  for (size_t r = 0; r < total % n; ++r) ++counts[r];
  return counts;
}

size_t shard_offset(const std::vector<size_t>& counts, int r) {
  size_t offset = 0;
  for (int i = 0; i < r; ++i) offset += counts.at(static_cast<size_t>(i));
  return offset;
}

OpStamp stamp_op(uint64_t seq, const char* name, size_t bytes, double timeout_s) {
  OpStamp s;
  s.seq = seq;
  s.name = name;
  s.bytes = bytes;
  s.issued = std::chrono::steady_clock::now();
  s.deadline = s.issued + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
  return s;
}

void check_shard_counts(const std::vector<size_t>& counts, int size) {
  if (counts.size() != static_cast<size_t>(size)) {
    throw std::invalid_argument("collective: counts has " + std::to_string(counts.size()) +
                                " entries for " + std::to_string(size) + " ranks");
  }
}

void check_root(int root, int size) {
  if (root < 0 || root >= size) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank");
  }
}

std::string broadcast_string(Communicator& comm, const std::string& value, int root) {
  const bool sender = comm.rank() == root;
  // Doubles because every backend carries them; a broadcast copies their bytes unchanged.
  double length = sender ? static_cast<double>(value.size()) : 0;
  comm.broadcast(&length, 1, DType::kFloat64, root)->wait();
  const size_t bytes = static_cast<size_t>(length);
  std::vector<double> words((bytes + sizeof(double) - 1) / sizeof(double), 0.0);
  if (sender && bytes > 0) std::memcpy(words.data(), value.data(), bytes);
  comm.broadcast(words.data(), words.size(), DType::kFloat64, root)->wait();
  return bytes == 0 ? std::string()
                    : std::string(reinterpret_cast<const char*>(words.data()), bytes);
}

std::string describe_op(int rank, int size, const char* op, uint64_t seq, size_t bytes,
                        double timeout_s) {
  char text[256];
  std::snprintf(text, sizeof(text), "[rank %d/%d] %s(seq=%llu, bytes=%zu, timeout=%gs)", rank, size,
                op, static_cast<unsigned long long>(seq), bytes, timeout_s);
  return text;
}

}  // namespace rm

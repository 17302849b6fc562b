// Multi-rank tests of the mpi backend (run under mpirun -np 1, 2 and 4 by CTest; the bf16 tests
// also on 3). Every rank can compute every rank's input, so each checks its result against a
// local reference, exactly: float and double inputs are small integers, so sums are exact in
// fp32 and averages are the same division. bf16 inputs are fractions, so that sums need rounding:
// the reference is the contract's (float sum in rank order, float division, one rounding).
#include <gtest/gtest.h>

#include <cstdlib>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"
#include "kernels/bf16.h"

namespace rm {
namespace {

using Algorithm = MpiOptions::Algorithm;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Rank r's input at global element i.
double input_value(int r, size_t i) {
  return static_cast<double>((r + 1) * static_cast<int>((i * 7 + static_cast<size_t>(r)) % 13)) - 6;
}

template <typename T>
DType dtype_of() {
  return sizeof(T) == 4 ? DType::kFloat32 : sizeof(T) == 8 ? DType::kFloat64 : DType::kBFloat16;
}

// Rank r's input at element i as a T. bf16: a fraction that bf16 rounds, and sums of which need
// rounding again (8 significant bits), so the tests see whether a result was rounded once.
template <typename T>
T input(int r, size_t i) {
  return static_cast<T>(input_value(r, i));
}
template <>
bf16 input<bf16>(int r, size_t i) {
  return to_bf16(static_cast<float>(input_value(r, i)) * 0.3711f + 0.0137f * static_cast<float>(r));
}

// What a buffer holds where no rank's data should land (no input equals it).
template <typename T>
T sentinel() {
  return static_cast<T>(-999);
}
template <>
bf16 sentinel<bf16>() {
  return to_bf16(-999.0f);
}

// The reduction of element i over n ranks, in rank order, as every backend must compute it.
template <typename T>
T reference(size_t i, int n, ReduceOp op) {
  T acc = input<T>(0, i);
  for (int r = 1; r < n; ++r) acc += input<T>(r, i);
  if (op == ReduceOp::kAvg) acc /= static_cast<T>(n);
  return acc;
}
// bf16: summed in float in rank order, divided in float, rounded once (communicator.h).
template <>
bf16 reference<bf16>(size_t i, int n, ReduceOp op) {
  float acc = to_float(input<bf16>(0, i));
  for (int r = 1; r < n; ++r) acc += to_float(input<bf16>(r, i));
  if (op == ReduceOp::kAvg) acc /= static_cast<float>(n);
  return to_bf16(acc);
}

// bf16 compares by bits (the contract is bitwise) and prints as bits and value.
bool operator!=(bf16 a, bf16 b) {
  return a.bits != b.bits;
}
std::string show(double x) {
  return std::to_string(x);
}
std::string show(bf16 x) {
  return std::to_string(to_float(x)) + " (bits " + std::to_string(x.bits) + ")";
}

// A test buffer: its own std::vector, or a slice of memory from Communicator::allocate()
// (carved in the same order on every rank).
template <typename T>
class Buf {
 public:
  Buf() = default;
  Buf(const Buf&) = delete;
  Buf(Buf&&) = default;  // a moved vector keeps its storage, so data_ stays valid
  Buf& operator=(Buf&&) = default;
  explicit Buf(size_t n, T fill) : own_(n, fill), data_(own_.data()), size_(n) {}
  Buf(T* data, size_t n, T fill) : data_(data), size_(n) { std::fill(data, data + n, fill); }
  T* data() { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  std::vector<T> own_;
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Counts the elements of buf[begin, end) that differ from want(i); describes the first.
template <typename Buffer, typename Want>
::testing::AssertionResult all_equal(const Buffer& buf, size_t begin, size_t end, Want want) {
  size_t wrong = 0;
  std::string first;
  for (size_t i = begin; i < end; ++i) {
    if (buf[i] != want(i)) {
      if (wrong++ == 0) {
        first =
            "element " + std::to_string(i) + ": got " + show(buf[i]) + ", want " + show(want(i));
      }
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << wrong << " of " << (end - begin) << " elements wrong; first " << first;
}

struct Param {
  const char* name;
  Algorithm algorithm;
  size_t slot_bytes;
  bool registered;  // buffers from Communicator::allocate()
  detail::HierLayout layout = detail::HierLayout::kRails;
};

class CommTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    CommOptions options;
    options.timeout_s = 60;
    MpiOptions mpi;
    mpi.algorithm = GetParam().algorithm;
    mpi.shm_slot_bytes = GetParam().slot_bytes;
    mpi.hier_layout = GetParam().layout;
    comm_ = make_mpi_communicator(MPI_COMM_WORLD, options, mpi);
    rank_ = comm_->rank();
    size_ = comm_->size();
    if (GetParam().registered) arena_ = static_cast<char*>(comm_->allocate(kArenaBytes));
  }

  // A buffer of n elements set to `fill`: registered (from the arena) or not, per the param.
  template <typename T>
  Buf<T> make(size_t n, T fill = T{}) {
    if (arena_ == nullptr) return Buf<T>(n, fill);
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    if (used_ + bytes > kArenaBytes) ADD_FAILURE() << "test arena exhausted";
    T* data = reinterpret_cast<T*>(arena_ + used_);
    used_ += bytes;
    return Buf<T>(data, n, fill);
  }
  void reset_arena() { used_ = 0; }  // only with nothing outstanding

  template <typename T>
  void check_all_reduce(size_t count, ReduceOp op) {
    reset_arena();
    Buf<T> buf = make<T>(count);
    for (size_t i = 0; i < count; ++i) buf[i] = input<T>(rank_, i);
    comm_->all_reduce(buf.data(), count, dtype_of<T>(), op)->wait();
    EXPECT_TRUE(all_equal(buf, 0, count, [&](size_t i) { return reference<T>(i, size_, op); }))
        << "all_reduce count=" << count << " " << reduce_op_name(op) << " "
        << dtype_name(dtype_of<T>());
  }

  template <typename T>
  void check_reduce_scatter(const std::vector<size_t>& counts, ReduceOp op) {
    const size_t total = shard_offset(counts, size_);
    reset_arena();
    Buf<T> buf = make<T>(total);
    for (size_t i = 0; i < total; ++i) buf[i] = input<T>(rank_, i);
    comm_->reduce_scatter(buf.data(), counts, dtype_of<T>(), op)->wait();
    const size_t begin = shard_offset(counts, rank_);
    EXPECT_TRUE(all_equal(buf, begin, begin + counts[static_cast<size_t>(rank_)],
                          [&](size_t i) { return reference<T>(i, size_, op); }))
        << "reduce_scatter total=" << total << " " << reduce_op_name(op) << " "
        << dtype_name(dtype_of<T>());
  }

  template <typename T>
  void check_all_gather(const std::vector<size_t>& counts) {
    const size_t total = shard_offset(counts, size_);
    reset_arena();
    Buf<T> buf = make<T>(total, sentinel<T>());
    const size_t begin = shard_offset(counts, rank_);
    for (size_t i = begin; i < begin + counts[static_cast<size_t>(rank_)]; ++i) {
      buf[i] = input<T>(rank_, i);
    }
    comm_->all_gather(buf.data(), counts, dtype_of<T>())->wait();
    for (int s = 0; s < size_; ++s) {
      const size_t from = shard_offset(counts, s);
      EXPECT_TRUE(all_equal(buf, from, from + counts[static_cast<size_t>(s)],
                            [&](size_t i) { return input<T>(s, i); }))
          << "all_gather slice of rank " << s << ", total=" << total << " "
          << dtype_name(dtype_of<T>());
    }
  }

  template <typename T>
  void check_broadcast(int root, size_t count) {
    reset_arena();
    Buf<T> buf = make<T>(count, sentinel<T>());
    if (rank_ == root) {
      for (size_t i = 0; i < count; ++i) buf[i] = input<T>(root, i);
    }
    comm_->broadcast(buf.data(), count, dtype_of<T>(), root)->wait();
    EXPECT_TRUE(all_equal(buf, 0, count, [&](size_t i) { return input<T>(root, i); }))
        << "broadcast root " << root << " count " << count << " " << dtype_name(dtype_of<T>());
  }

  // Shard layouts: even, fewer elements than ranks, zeros in the middle, all on one rank.
  std::vector<std::vector<size_t>> layouts(size_t big) const {
    std::vector<std::vector<size_t>> all;
    for (size_t total : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, big}) {
      all.push_back(shard_counts(total, size_));
    }
    std::vector<size_t> alternating(static_cast<size_t>(size_));
    std::vector<size_t> last_only(static_cast<size_t>(size_), 0);
    for (int r = 0; r < size_; ++r) alternating[static_cast<size_t>(r)] = r % 2 ? 37 * r + 5 : 0;
    last_only.back() = 100003;
    all.push_back(alternating);
    all.push_back(last_only);
    return all;
  }

  static constexpr size_t kArenaBytes = size_t{48} << 20;
  std::unique_ptr<Communicator> comm_;
  int rank_ = 0;
  int size_ = 1;
  char* arena_ = nullptr;
  size_t used_ = 0;
};

// 5 MiB + 3 elements: many pipeline steps, and a ragged last one.
template <typename T>
constexpr size_t kBig = (size_t{5} << 20) / sizeof(T) + 3;

TEST_P(CommTest, ReportsRankSizeBackend) {
  EXPECT_EQ(comm_->rank(), world_rank());
  EXPECT_EQ(comm_->size(), world_size());
  EXPECT_EQ(comm_->backend(), "mpi");
  // The fixture's allocate() is an operation where it meets the other ranks (shared memory).
  const bool met =
      GetParam().registered && comm_->describe().find("shared memory") != std::string::npos;
  EXPECT_EQ(comm_->sequence(), met ? 1u : 0u) << comm_->describe();
  // Run across test hosts (tests/cluster), the path auto chose is the one the run expects.
  const char* expect = std::getenv("RM_EXPECT_AUTO_PATH");
  if (expect != nullptr && GetParam().algorithm == Algorithm::kAuto) {
    const std::string want =
        GetParam().layout == detail::HierLayout::kLeaders && std::string(expect) == "hierarchical"
            ? "host leaders"
            : expect;
    EXPECT_NE(comm_->describe().find(want), std::string::npos) << comm_->describe();
  }
}

TEST_P(CommTest, AllReduceFloatSumAndAvg) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (size_t count :
         {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{65537}, kBig<float>}) {
      check_all_reduce<float>(count, op);
    }
  }
}

TEST_P(CommTest, AllReduceDoubleSumAndAvg) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{4099}, kBig<double>}) {
      check_all_reduce<double>(count, op);
    }
  }
}

// Floats whose sum depends on the order it is taken in (magnitudes 2^-20..2^20, both signs): on
// one host and on the flat MPI path every rank gets the rank-ordered sum, bit for bit -- the
// shared-memory engine's result, whichever path ran. (The hierarchical path sums each host's
// ranks in order, then the hosts in order: a different, documented order.) MPI's own reductions
// would combine in a tree and fail this on 3+ ranks.
TEST_P(CommTest, FloatSumsAreRankOrderedOffTheHierarchicalPath) {
  if (comm_->describe().find("hierarchical") != std::string::npos) GTEST_SKIP();
  const auto value = [](int r, size_t i) {  // a hash of (r, i): cheap, the same on every rank
    uint64_t h = (i * 4 + static_cast<uint64_t>(r) + 1) * 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 31)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const float mantissa = 1.0f + static_cast<float>(h & 0xFFFFF) / float{1 << 20};
    const int exponent = static_cast<int>((h >> 20) % 41) - 20;
    return ((h >> 40) & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
  };
  const auto rank_ordered = [&](size_t i) {
    float acc = value(0, i);
    for (int r = 1; r < size_; ++r) acc += value(r, i);
    return acc;
  };
  for (size_t count : {size_t{1}, size_t{4099}, kBig<float>}) {
    reset_arena();
    Buf<float> reduced = make<float>(count);
    Buf<float> scattered = make<float>(count);
    for (size_t i = 0; i < count; ++i) reduced[i] = scattered[i] = value(rank_, i);
    const std::vector<size_t> counts = shard_counts(count, size_);
    comm_->all_reduce(reduced.data(), count, DType::kFloat32, ReduceOp::kSum)->wait();
    comm_->reduce_scatter(scattered.data(), counts, DType::kFloat32, ReduceOp::kSum)->wait();
    EXPECT_TRUE(all_equal(reduced, 0, count, rank_ordered)) << "all_reduce count=" << count;
    const size_t begin = shard_offset(counts, rank_);
    EXPECT_TRUE(all_equal(scattered, begin, begin + counts[static_cast<size_t>(rank_)],
                          rank_ordered))
        << "reduce_scatter count=" << count;
  }
}

TEST_P(CommTest, ReduceScatterUnevenShards) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (const auto& counts : layouts(kBig<float>)) check_reduce_scatter<float>(counts, op);
    for (const auto& counts : layouts(4099)) check_reduce_scatter<double>(counts, op);
  }
}

TEST_P(CommTest, AllGatherUnevenShards) {
  for (const auto& counts : layouts(kBig<float>)) check_all_gather<float>(counts);
  for (const auto& counts : layouts(kBig<double>)) check_all_gather<double>(counts);
}

TEST_P(CommTest, BFloat16AllReduceSumAndAvg) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (size_t count :
         {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{65537}, kBig<bf16>}) {
      check_all_reduce<bf16>(count, op);
    }
  }
}

TEST_P(CommTest, BFloat16ReduceScatterEvenAndUnevenShards) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (const auto& counts : layouts(kBig<bf16>)) check_reduce_scatter<bf16>(counts, op);
  }
}

TEST_P(CommTest, BFloat16AllGatherEvenAndUnevenShards) {
  for (const auto& counts : layouts(kBig<bf16>)) check_all_gather<bf16>(counts);
}

TEST_P(CommTest, BFloat16BroadcastFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    for (size_t count : {size_t{0}, size_t{5}, size_t{300001}}) check_broadcast<bf16>(root, count);
  }
}

// bf16 all-reduces outstanding together with other operations, waited for out of order (on the
// MPI path each is two requests, the second issued when the first completes).
TEST_P(CommTest, BFloat16OutstandingWithOtherOperations) {
  const size_t n = 100003;
  const auto counts = shard_counts(n, size_);
  const size_t own = shard_offset(counts, rank_);
  Buf<bf16> a = make<bf16>(n), b = make<bf16>(n), rs = make<bf16>(n);
  Buf<float> f = make<float>(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = b[i] = rs[i] = input<bf16>(rank_, i);
    f[i] = input<float>(rank_, i);
  }
  std::vector<std::unique_ptr<Work>> works;
  works.push_back(comm_->all_reduce(a.data(), n, DType::kBFloat16, ReduceOp::kSum));
  works.push_back(comm_->all_reduce(f.data(), n, DType::kFloat32, ReduceOp::kSum));
  comm_->progress();
  works.push_back(comm_->reduce_scatter(rs.data(), counts, DType::kBFloat16, ReduceOp::kAvg));
  works.push_back(comm_->all_reduce(b.data(), n, DType::kBFloat16, ReduceOp::kAvg));
  for (size_t w : {3, 0, 2, 1}) works[w]->wait();
  EXPECT_TRUE(
      all_equal(a, 0, n, [&](size_t i) { return reference<bf16>(i, size_, ReduceOp::kSum); }));
  EXPECT_TRUE(
      all_equal(b, 0, n, [&](size_t i) { return reference<bf16>(i, size_, ReduceOp::kAvg); }));
  EXPECT_TRUE(all_equal(rs, own, own + counts[static_cast<size_t>(rank_)],
                        [&](size_t i) { return reference<bf16>(i, size_, ReduceOp::kAvg); }));
  EXPECT_TRUE(
      all_equal(f, 0, n, [&](size_t i) { return reference<float>(i, size_, ReduceOp::kSum); }));
}

// The bf16 inputs are chosen so that rounding once differs from rounding after every addition
// (as a reduction in bf16 would): otherwise the tests above could not tell the two apart.
TEST(BFloat16Reference, RoundingOnceIsObservable) {
  const int n = world_size();
  if (n < 3) GTEST_SKIP() << "fewer than two additions: both ways round once";
  size_t differ = 0;
  for (size_t i = 0; i < 1000; ++i) {
    bf16 stepwise = input<bf16>(0, i);
    for (int r = 1; r < n; ++r)
      stepwise = to_bf16(to_float(stepwise) + to_float(input<bf16>(r, i)));
    if (stepwise != reference<bf16>(i, n, ReduceOp::kSum)) ++differ;
  }
  EXPECT_GT(differ, 0u);
}

TEST_P(CommTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    for (size_t count : {size_t{0}, size_t{5}, size_t{300001}}) {
      reset_arena();
      Buf<double> buf = make<double>(count, -999);
      if (rank_ == root) {
        for (size_t i = 0; i < count; ++i) buf[i] = input_value(root, i);
      }
      comm_->broadcast(buf.data(), count, DType::kFloat64, root)->wait();
      EXPECT_TRUE(all_equal(buf, 0, count, [&](size_t i) { return input_value(root, i); }))
          << "root " << root << " count " << count;
    }
  }
  EXPECT_THROW(comm_->broadcast(nullptr, 0, DType::kFloat32, size_), std::invalid_argument);
}

TEST_P(CommTest, BroadcastStringFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    // Empty, shorter than a word, a NUL inside, not a whole number of words, a megabyte.
    for (std::string sent : {std::string(), std::string("runs/a"), std::string("a\0b", 3),
                             std::string(1001, 'x'), std::string(size_t{1} << 20, 'y')}) {
      sent += std::to_string(root);
      const std::string mine = rank_ == root ? sent : "what rank " + std::to_string(rank_) + " had";
      const std::string got = broadcast_string(*comm_, mine, root);
      EXPECT_TRUE(got == sent) << "root " << root << ": " << got.size() << " bytes of "
                               << sent.size() << ", beginning '" << got.substr(0, 16) << "'";
    }
  }
}

TEST_P(CommTest, SequenceCountsEveryOperation) {
  float x[3] = {1, 2, 3};
  const uint64_t start = comm_->sequence();
  comm_->all_reduce(x, 3, DType::kFloat32, ReduceOp::kSum)->wait();
  comm_->barrier();
  comm_->broadcast(x, 3, DType::kFloat32, 0)->wait();
  comm_->all_gather(x, shard_counts(3, size_), DType::kFloat32)->wait();
  EXPECT_EQ(comm_->sequence(), start + 4);
}

// In-memory checkpoint replicas: each rank sends a buffer to the next rank of a ring and
// receives the previous one's, while an all-reduce is outstanding, in two messages matched in
// order; a peer of -1 completes at once. Each p2p call counts as an operation.
TEST_P(CommTest, RingSendAndReceiveBesideACollective) {
  const size_t n = 100003;
  const int to = (rank_ + 1) % size_, from = (rank_ + size_ - 1) % size_;
  std::vector<float> out(2 * n), in(2 * n, -1.0f);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(input_value(rank_, i));
  Buf<float> grads = make<float>(4099);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(input_value(rank_, i));
  const uint64_t start = comm_->sequence();
  auto reduce = comm_->all_reduce(grads.data(), grads.size(), DType::kFloat32, ReduceOp::kSum);
  std::vector<std::unique_ptr<Work>> works;
  for (int piece = 0; piece < 2; ++piece) {
    works.push_back(comm_->recv(in.data() + piece * n, n * sizeof(float), from));
    works.push_back(comm_->send(out.data() + piece * n, n * sizeof(float), to));
  }
  works.push_back(comm_->send(out.data(), 16, -1));
  works.push_back(comm_->recv(in.data(), 0, -1));
  EXPECT_TRUE(works.back()->test());
  while (!works[0]->test() || !works[1]->test() || !works[2]->test() || !works[3]->test()) {
    comm_->progress();
  }
  reduce->wait();
  EXPECT_EQ(comm_->sequence(), start + 7);
  EXPECT_TRUE(all_equal(in, 0, in.size(),
                        [&](size_t i) { return static_cast<float>(input_value(from, i)); }));
  EXPECT_TRUE(all_equal(grads, 0, grads.size(),
                        [&](size_t i) { return reference<float>(i, size_, ReduceOp::kSum); }));
}

// Backward issues gradient buckets last-first; they are waited for later, in any order.
TEST_P(CommTest, OutstandingBucketsIssuedInReverse) {
  const std::vector<size_t> bucket_sizes = {70001, 1, 300007};
  std::vector<size_t> offsets = {0};
  for (size_t n : bucket_sizes) offsets.push_back(offsets.back() + n);
  Buf<float> grads = make<float>(offsets.back());
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(input_value(rank_, i));
  std::vector<std::unique_ptr<Work>> works;
  for (size_t b = bucket_sizes.size(); b-- > 0;) {
    works.push_back(comm_->all_reduce(grads.data() + offsets[b], bucket_sizes[b], DType::kFloat32,
                                      ReduceOp::kAvg));
    comm_->progress();  // as between layers of backward
  }
  works[1]->wait();
  works[2]->wait();
  works[0]->wait();
  EXPECT_TRUE(all_equal(grads, 0, grads.size(),
                        [&](size_t i) { return reference<float>(i, size_, ReduceOp::kAvg); }));
}

// Different operations outstanding together, completed by polling test() alone.
TEST_P(CommTest, MixedOutstandingOperationsCompleteByPolling) {
  const size_t n = 200003;
  const auto counts = shard_counts(n, size_);
  Buf<float> a = make<float>(n), rs = make<float>(n), ag = make<float>(n, -999);
  Buf<double> bc = make<double>(1001, -999);
  for (size_t i = 0; i < n; ++i) a[i] = rs[i] = static_cast<float>(input_value(rank_, i));
  const size_t own = shard_offset(counts, rank_);
  for (size_t i = own; i < own + counts[static_cast<size_t>(rank_)]; ++i) ag[i] = a[i];
  if (rank_ == 0) {
    for (size_t i = 0; i < bc.size(); ++i) bc[i] = input_value(0, i);
  }
  std::vector<std::unique_ptr<Work>> works;
  works.push_back(comm_->all_reduce(a.data(), n, DType::kFloat32, ReduceOp::kSum));
  works.push_back(comm_->reduce_scatter(rs.data(), counts, DType::kFloat32, ReduceOp::kSum));
  works.push_back(comm_->broadcast(bc.data(), bc.size(), DType::kFloat64, 0));
  works.push_back(comm_->all_gather(ag.data(), counts, DType::kFloat32));
  for (bool all_done = false; !all_done;) {
    all_done = true;
    for (auto& work : works) all_done = work->test() && all_done;
  }
  auto sum = [&](size_t i) { return reference<float>(i, size_, ReduceOp::kSum); };
  EXPECT_TRUE(all_equal(a, 0, n, sum));
  EXPECT_TRUE(all_equal(rs, own, own + counts[static_cast<size_t>(rank_)], sum));
  EXPECT_TRUE(all_equal(bc, 0, bc.size(), [](size_t i) { return input_value(0, i); }));
  for (int s = 0; s < size_; ++s) {
    const size_t from = shard_offset(counts, s);
    EXPECT_TRUE(all_equal(ag, from, from + counts[static_cast<size_t>(s)],
                          [&](size_t i) { return static_cast<float>(input_value(s, i)); }));
  }
}

// Random sequences (the same on every rank: a fixed seed) of every kind of operation, with up to
// four outstanding at a time: shakes out slot-reuse and ordering races across operations.
TEST_P(CommTest, RandomSequencesOfOutstandingOperations) {
  std::mt19937 rng(1234);
  struct Pending {
    std::unique_ptr<Work> work;
    int kind;
    Buf<float> buf;
    std::vector<size_t> counts;
  };
  std::deque<Pending> pending;
  auto check = [&](Pending& p) {
    p.work->wait();
    const size_t total = p.buf.size();
    auto sum = [&](size_t i) { return reference<float>(i, size_, ReduceOp::kSum); };
    if (p.kind == 0) {
      EXPECT_TRUE(all_equal(p.buf, 0, total, sum)) << "all_reduce of " << total;
    } else if (p.kind == 1) {
      const size_t own = shard_offset(p.counts, rank_);
      EXPECT_TRUE(all_equal(p.buf, own, own + p.counts[static_cast<size_t>(rank_)], sum))
          << "reduce_scatter of " << total;
    } else {
      for (int s = 0; s < size_; ++s) {
        const size_t from = shard_offset(p.counts, s);
        EXPECT_TRUE(all_equal(p.buf, from, from + p.counts[static_cast<size_t>(s)],
                              [&](size_t i) { return static_cast<float>(input_value(s, i)); }))
            << "all_gather of " << total;
      }
    }
  };
  for (int i = 0; i < 150; ++i) {
    Pending p;
    p.kind = static_cast<int>(rng() % 3);
    const size_t total = rng() % 4 == 0 ? rng() % 8 : rng() % 40000;
    p.counts = shard_counts(total, size_);
    if (rng() % 2) std::shuffle(p.counts.begin(), p.counts.end(), rng);  // uneven layouts
    p.buf = make<float>(total, -999.0f);
    const size_t own = shard_offset(p.counts, rank_);
    for (size_t e = 0; e < total; ++e) {
      const bool mine = e >= own && e < own + p.counts[static_cast<size_t>(rank_)];
      if (p.kind != 2 || mine) p.buf[e] = static_cast<float>(input_value(rank_, e));
    }
    if (p.kind == 0) {
      p.work = comm_->all_reduce(p.buf.data(), total, DType::kFloat32, ReduceOp::kSum);
    } else if (p.kind == 1) {
      p.work = comm_->reduce_scatter(p.buf.data(), p.counts, DType::kFloat32, ReduceOp::kSum);
    } else {
      p.work = comm_->all_gather(p.buf.data(), p.counts, DType::kFloat32);
    }
    pending.push_back(std::move(p));
    if (pending.size() > rng() % 5) {
      check(pending.front());
      pending.pop_front();
    }
  }
  for (auto& p : pending) check(p);
}

TEST_P(CommTest, BackToBackBarriersAndDroppedWork) {
  Buf<float> x = make<float>(1000, 1.0f);
  for (int i = 0; i < 20; ++i) {
    comm_->all_reduce(x.data(), x.size(), DType::kFloat32, ReduceOp::kAvg);  // dropped
    comm_->barrier();  // completes everything issued before it
  }
  EXPECT_TRUE(all_equal(x, 0, x.size(), [](size_t) { return 1.0f; }));
}

TEST_P(CommTest, RejectsCountsOfTheWrongLength) {
  std::vector<size_t> counts(static_cast<size_t>(size_) + 1, 1);
  EXPECT_THROW(comm_->reduce_scatter(nullptr, counts, DType::kFloat32, ReduceOp::kSum),
               std::invalid_argument);
  EXPECT_THROW(comm_->all_gather(nullptr, counts, DType::kFloat32), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, CommTest,
    ::testing::Values(Param{"auto", Algorithm::kAuto, MpiOptions{}.shm_slot_bytes, false},
                      // Tiny slots: many pipeline steps and slot reuse even on small inputs.
                      Param{"auto_tiny_slots", Algorithm::kAuto, 1024, false},
                      Param{"auto_registered", Algorithm::kAuto, MpiOptions{}.shm_slot_bytes, true},
                      // Across hosts: the hierarchy with one leader per host, and no hierarchy.
                      Param{"auto_leaders", Algorithm::kAuto, 1024, true, detail::HierLayout::kLeaders},
                      Param{"across_hosts_flat", Algorithm::kMpiAcrossHosts, MpiOptions{}.shm_slot_bytes, true},
                      Param{"mpi", Algorithm::kMpi, 0, false},
                      Param{"mpi_registered", Algorithm::kMpi, 0, true}),
    [](const ::testing::TestParamInfo<Param>& info) { return std::string(info.param.name); });

TEST(ShardTest, CountsAndOffsets) {
  EXPECT_EQ(shard_counts(10, 3), (std::vector<size_t>{4, 3, 3}));
  EXPECT_EQ(shard_counts(2, 4), (std::vector<size_t>{1, 1, 0, 0}));
  EXPECT_EQ(shard_counts(0, 2), (std::vector<size_t>{0, 0}));
  EXPECT_EQ(shard_offset({4, 3, 3}, 0), 0u);
  EXPECT_EQ(shard_offset({4, 3, 3}, 2), 7u);
  EXPECT_EQ(shard_offset({4, 3, 3}, 3), 10u);
  EXPECT_THROW(shard_counts(1, 0), std::invalid_argument);
  EXPECT_EQ(describe_op(1, 2, "all_reduce", 812, 4194304, 30),
            "[rank 1/2] all_reduce(seq=812, bytes=4194304, timeout=30s)");
}

// A rank that arrives late: the others time out, name the op, its sequence number and the rank
// they wait for, and poison the communicator so the late rank fails at once too. Shared-memory
// path only: after a timeout, MPI's own requests would stay pending into MPI_Finalize. The
// timeout also covers the first barrier, which every rank must reach in time: 2 s, not less,
// for ranks that a loaded machine (4 ranks on 2 cores) deschedules.
TEST(FailureTest, TimeoutThrowsWithOperationAndSequence) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  CommOptions options;
  options.timeout_s = 2;
  options.abort_on_error = false;
  MpiOptions mpi;
  mpi.algorithm = Algorithm::kSharedMemory;
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options, mpi);
  comm->barrier();  // seq=1
  if (comm->rank() == 1) usleep(5000 * 1000);
  float x[64] = {};
  std::string message;
  try {
    comm->all_reduce(x, 64, DType::kFloat32, ReduceOp::kSum)->wait();
  } catch (const CollectiveError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("all_reduce(seq=2, bytes=256, timeout=2s)"), std::string::npos) << message;
  if (comm->rank() == 1) {
    EXPECT_NE(message.find("reported a failure"), std::string::npos) << message;
  } else {
    // The first to time out names rank 1; the others may learn of its failure first.
    EXPECT_TRUE(message.find("timed out after") != std::string::npos ||
                message.find("reported a failure") != std::string::npos)
        << message;
  }
  if (comm->rank() == 0 && message.find("timed out") != std::string::npos) {
    EXPECT_NE(message.find("waiting for rank 1"), std::string::npos) << message;
  }
  EXPECT_THROW(comm->barrier(), CollectiveError);  // broken for good
  comm.reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

// A reduction of INT_MAX elements on the MPI path: the shards differ by one element, and the
// rank whose shard times the ranks passed INT_MAX (its exchange's int displacements) refused it
// while the others issued the exchange and waited for it (or read past the buffer): the limit is
// judged from counts every rank holds alike, so every rank refuses, and the communicator goes on
// in step (nothing was issued). The buffer is never read: the call is refused first.
TEST(FailureTest, CountsPastIntMaxAreRefusedOnEveryRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  CommOptions options;
  options.timeout_s = 20;
  options.abort_on_error = false;
  MpiOptions mpi;
  mpi.algorithm = Algorithm::kMpi;
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options, mpi);
  std::vector<float> small(16, 1.0f);
  const std::vector<size_t> counts = shard_counts(INT_MAX, comm->size());
  ASSERT_GT(counts[0] * counts.size(), static_cast<size_t>(INT_MAX));      // rank 0's is past it
  ASSERT_LE(counts.back() * counts.size(), static_cast<size_t>(INT_MAX));  // the last's is not
  for (int call = 0; call < 2; ++call) {
    std::string message;
    try {
      if (call == 0) {
        comm->reduce_scatter(small.data(), counts, DType::kFloat32, ReduceOp::kSum)->wait();
      } else {
        comm->all_reduce(small.data(), INT_MAX, DType::kFloat32, ReduceOp::kSum)->wait();
      }
    } catch (const CollectiveError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("more than INT_MAX elements"), std::string::npos)
        << "call " << call << " on rank " << comm->rank() << ": " << message;
  }
  comm->all_reduce(small.data(), small.size(), DType::kFloat32, ReduceOp::kSum)->wait();
  EXPECT_EQ(small[0], static_cast<float>(comm->size()));
  comm.reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

// Registered memory on one rank and ordinary memory on another: the ranks would run different
// algorithms, so the mismatch must be detected and fail the operation everywhere.
TEST(FailureTest, RegisteredBufferOnSomeRanksOnlyFailsEverywhere) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  CommOptions options;
  options.timeout_s = 10;
  options.abort_on_error = false;
  MpiOptions mpi;
  mpi.algorithm = Algorithm::kSharedMemory;
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options, mpi);
  auto* registered = static_cast<float*>(comm->allocate(1024 * sizeof(float)));
  std::vector<float> plain(1024);
  float* buf = comm->rank() == 0 ? registered : plain.data();
  std::string message;
  try {
    comm->all_reduce(buf, 1024, DType::kFloat32, ReduceOp::kSum)->wait();
  } catch (const CollectiveError& e) {
    message = e.what();
  }
  // allocate() was seq=1: its meeting counts as an operation.
  EXPECT_NE(message.find("all_reduce(seq=2, bytes=4096"), std::string::npos) << message;
  EXPECT_TRUE(message.find("passed a buffer from allocate() and rank") != std::string::npos ||
              message.find("reported a failure") != std::string::npos)
      << message;
  comm.reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace rm

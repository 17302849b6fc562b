// The one-rank communicator: identity operations on every dtype, and allocate() through a
// caller's memory functions (as a 1-rank run on the CUDA backend passes its device allocator).
#include "collectives/self_communicator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace rm {
namespace {

// Every operation on every dtype completes at once and leaves the bytes as they were.
TEST(SelfCommunicator, OperationsAreTheIdentity) {
  auto comm = make_self_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), "self");
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
    std::vector<unsigned char> buf(10 * dtype_size(dtype));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 37 + 1);
    const std::vector<unsigned char> before = buf;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      EXPECT_TRUE(comm->all_reduce(buf.data(), 10, dtype, op)->test());
      EXPECT_TRUE(comm->reduce_scatter(buf.data(), {10}, dtype, op)->test());
    }
    EXPECT_TRUE(comm->all_gather(buf.data(), {10}, dtype)->test());
    comm->broadcast(buf.data(), 10, dtype, 0)->wait();
    EXPECT_EQ(buf, before) << dtype_name(dtype);
  }
  comm->barrier();
  EXPECT_EQ(comm->sequence(), 3u * 6 + 1);
  EXPECT_THROW(comm->reduce_scatter(nullptr, {1, 1}, DType::kFloat32, ReduceOp::kSum),
               std::invalid_argument);
  EXPECT_THROW(comm->broadcast(nullptr, 1, DType::kFloat32, 1), std::invalid_argument);
}

TEST(SelfCommunicator, DefaultAllocateIsZeroFilledHostMemory) {
  auto comm = make_self_communicator();
  auto* p = static_cast<unsigned char*>(comm->allocate(10000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ(p[i], 0) << i;
}

// Memory the host may not touch (PROT_NONE) stands in for device memory: any access by the
// communicator would crash the test. allocate() hands it out; the operations leave it alone;
// destruction releases every block through the caller's function.
TEST(SelfCommunicator, CallerMemoryIsHandedOutAndReleasedButNeverTouched) {
  std::vector<std::pair<void*, size_t>> live;
  int released = 0;
  SelfMemory memory;
  memory.allocate = [&](size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    live.emplace_back(p, bytes);
    return p;
  };
  memory.release = [&](void* p) {
    for (auto& block : live) {
      if (block.first == p) {
        munmap(p, block.second);
        block.first = nullptr;
        ++released;
      }
    }
  };
  {
    auto comm = make_self_communicator(memory);
    void* a = comm->allocate(1 << 20);
    void* b = comm->allocate(4096);
    ASSERT_EQ(live.size(), 2u);
    EXPECT_EQ(a, live[0].first);
    EXPECT_EQ(b, live[1].first);
    comm->all_reduce(a, (1 << 20) / 2, DType::kBFloat16, ReduceOp::kAvg)->wait();
    comm->reduce_scatter(a, {1000}, DType::kFloat32, ReduceOp::kSum)->wait();
    comm->all_gather(b, {512}, DType::kFloat64)->wait();
    comm->broadcast(b, 1024, DType::kFloat32, 0)->wait();
    comm->barrier();
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 2);
}

TEST(SelfCommunicator, RejectsHalfAMemorySpec) {
  SelfMemory memory;
  memory.allocate = [](size_t) -> void* { return nullptr; };
  EXPECT_THROW(make_self_communicator(memory), std::invalid_argument);
}

}  // namespace
}  // namespace rm

// DeviceArena (kernels/device_arena.h): every slice starts on a 256-byte boundary in plan order,
// for any mix of element types and sizes (zero included); bytes() is the sum of the rounded-up
// slices; pointers are set by allocate() and not before; the memory is zero-filled and is ONE
// allocation of the Compute, released once with the arena.
#include "kernels/device_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/compute_factory.h"

namespace rm {
namespace {

// The cpu Compute's memory, with the calls counted; DeviceArena uses nothing else.
class CountingCompute final : public Compute {
 public:
  ComputeKind kind() const override { return ComputeKind::kCpu; }
  std::string describe() const override { return "counting"; }
  void* allocate(size_t bytes) override {
    allocated_bytes.push_back(bytes);
    return cpu_->allocate(bytes);
  }
  void release(void* memory) override {
    released.push_back(memory);
    cpu_->release(memory);
  }
  void* allocate_host(size_t) override { unused(); }
  void release_host(void*) override { unused(); }
  void upload(void*, const void*, size_t) override { unused(); }
  void download(void*, const void*, size_t) override { unused(); }
  void copy(void*, const void*, size_t) override { unused(); }
  void zero(void*, size_t) override { unused(); }
  void download_async(void*, const void*, size_t) override { unused(); }
  std::function<void()> downloads_fence() override { unused(); }
  void synchronize() override { unused(); }
  LayerKernels<float>& layers_f32() override { unused(); }
  LayerKernels<bf16>& layers_bf16() override { unused(); }
  void sgemm(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*,
             int) override {
    unused();
  }
  void adamw_update(float*, const float*, float*, float*, size_t, float, float, float, float, float,
                    int64_t, float) override {
    unused();
  }
  double sum_squares(const float*, size_t) override { unused(); }
  void add_inplace(float*, const float*, size_t) override { unused(); }
  void add_inplace(float*, const bf16*, size_t) override { unused(); }
  void scale(float*, size_t, float) override { unused(); }
  void cast(bf16*, const float*, size_t) override { unused(); }
  void cast(float*, const bf16*, size_t) override { unused(); }

  std::vector<size_t> allocated_bytes;
  std::vector<void*> released;

 private:
  [[noreturn]] static void unused() { throw std::logic_error("DeviceArena made another call"); }

  std::unique_ptr<Compute> cpu_ = make_compute(ComputeKind::kCpu, {});
};

size_t offset(const void* base, const void* p) {
  return static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(base));
}

TEST(DeviceArena, MixedTypesLayOutInPlanOrderOn256ByteBoundaries) {
  CountingCompute compute;
  DeviceArena arena(compute);
  char* c = nullptr;
  double* d = nullptr;
  bf16* h = nullptr;
  float* f = nullptr;
  int32_t* i = nullptr;
  arena.plan(c, 3);    // [0, 3)       -> 256
  arena.plan(d, 32);   // [256, 512)   exactly one block: no padding
  arena.plan(h, 129);  // [512, 770)   -> 1024
  arena.plan(f, 1);    // [1024, 1028) -> 1280
  arena.plan(i, 100);  // [1280, 1680) -> 1792
  EXPECT_EQ(arena.bytes(), 1792u);
  arena.allocate();

  ASSERT_NE(c, nullptr);
  EXPECT_EQ(offset(c, d), 256u);
  EXPECT_EQ(offset(c, h), 512u);
  EXPECT_EQ(offset(c, f), 1024u);
  EXPECT_EQ(offset(c, i), 1280u);
  for (const void* p :
       {static_cast<const void*>(c), static_cast<const void*>(d), static_cast<const void*>(h),
        static_cast<const void*>(f), static_cast<const void*>(i)}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % DeviceArena::kAlign, 0u) << p;
  }
}

TEST(DeviceArena, BytesIsTheSumOfTheRoundedUpSlices) {
  CountingCompute compute;
  DeviceArena arena(compute);
  EXPECT_EQ(arena.bytes(), 0u);
  std::vector<float*> ptrs(6, nullptr);
  const size_t floats[] = {1, 63, 64, 65, 1000, 4096};
  size_t want = 0;
  for (size_t k = 0; k < ptrs.size(); ++k) {
    arena.plan(ptrs[k], floats[k]);
    want += (floats[k] * sizeof(float) + 255) / 256 * 256;
    EXPECT_EQ(arena.bytes(), want) << "after slice " << k;
  }
  arena.allocate();
  for (size_t k = 1; k < ptrs.size(); ++k) {
    EXPECT_GE(offset(ptrs[k - 1], ptrs[k]), floats[k - 1] * sizeof(float)) << "slices overlap";
  }
  EXPECT_LE(offset(ptrs[0], ptrs.back()) + floats[5] * sizeof(float), arena.bytes());
}

TEST(DeviceArena, ZeroLengthSlicesTakeNoSpace) {
  CountingCompute compute;
  DeviceArena arena(compute);
  float* empty_first = nullptr;
  float* data = nullptr;
  bf16* empty_between = nullptr;
  double* after = nullptr;
  arena.plan(empty_first, 0);
  EXPECT_EQ(arena.bytes(), 0u);
  arena.plan(data, 10);
  arena.plan(empty_between, 0);
  arena.plan(after, 1);
  EXPECT_EQ(arena.bytes(), 512u);
  arena.allocate();
  // An empty slice is a valid, aligned pointer where the next slice starts.
  EXPECT_EQ(static_cast<void*>(empty_first), static_cast<void*>(data));
  EXPECT_EQ(offset(data, empty_between), 256u);
  EXPECT_EQ(static_cast<void*>(empty_between), static_cast<void*>(after));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(empty_between) % DeviceArena::kAlign, 0u);
}

TEST(DeviceArena, AnEmptyPlanStillAllocatesOnce) {
  CountingCompute compute;
  {
    DeviceArena arena(compute);
    arena.allocate();
    EXPECT_EQ(arena.bytes(), 0u);
    EXPECT_EQ(compute.allocated_bytes, std::vector<size_t>{0});
  }
  EXPECT_EQ(compute.released.size(), 1u);
}

TEST(DeviceArena, PointersAreSetByAllocateOnly) {
  CountingCompute compute;
  DeviceArena arena(compute);
  float* a = nullptr;
  bf16* b = reinterpret_cast<bf16*>(uintptr_t{0x1234});  // any previous value stays until then
  arena.plan(a, 5);
  arena.plan(b, 5);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b), 0x1234u);
  EXPECT_TRUE(compute.allocated_bytes.empty()) << "plan() must not allocate";
  arena.allocate();
  EXPECT_NE(a, nullptr);
  EXPECT_EQ(offset(a, b), 256u);
}

TEST(DeviceArena, OneZeroFilledAllocationReleasedWithTheArena) {
  CountingCompute compute;
  void* base = nullptr;
  {
    DeviceArena arena(compute);
    float* f = nullptr;
    bf16* h = nullptr;
    char* c = nullptr;
    arena.plan(f, 300);
    arena.plan(h, 77);
    arena.plan(c, 5000);
    arena.allocate();
    ASSERT_EQ(compute.allocated_bytes, std::vector<size_t>{arena.bytes()});
    base = f;
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(f);
    size_t nonzero = 0;
    for (size_t k = 0; k < arena.bytes(); ++k) nonzero += bytes[k] != 0;
    EXPECT_EQ(nonzero, 0u);
    EXPECT_TRUE(compute.released.empty());
  }
  EXPECT_EQ(compute.released, std::vector<void*>{base});
}

// A sizing arena adds up the same plan to the same bytes, sets no pointer, and cannot allocate:
// what models use to say what they would need (model/model.h, ModelFootprint).
TEST(DeviceArena, ASizingArenaOnlyAddsUp) {
  CountingCompute compute;
  DeviceArena real(compute), sizing;
  float* f[2] = {nullptr, nullptr};
  bf16* h[2] = {nullptr, nullptr};
  for (int k = 0; k < 2; ++k) {
    DeviceArena& arena = k == 0 ? real : sizing;
    arena.plan(f[k], 1000);
    arena.plan(h[k], 7);
  }
  EXPECT_EQ(sizing.bytes(), real.bytes());
  EXPECT_THROW(sizing.allocate(), std::logic_error);
  EXPECT_EQ(f[1], nullptr);
  EXPECT_EQ(h[1], nullptr);
  EXPECT_TRUE(compute.allocated_bytes.empty());
}

}  // namespace
}  // namespace rm

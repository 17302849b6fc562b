// The nccl backend on device buffers (CTest: mpirun -np 1 and 2). Skips at run time unless
// every rank on this node has a GPU of its own; nothing here runs on a machine without GPUs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collectives/nccl/nccl_communicator.h"

namespace rm {
namespace {

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local_ranks = 0;
    MPI_Comm_size(node, &local_ranks);
    MPI_Comm_free(&node);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    int usable = devices >= local_ranks ? 1 : 0;
    int all_usable = 0;
    MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_usable) {
      GTEST_SKIP() << "needs one GPU per rank on the node (found " << devices << " for "
                   << local_ranks << " ranks)";
    }
    CommOptions options;
    options.timeout_s = 60;
    comm_ = make_nccl_communicator(MPI_COMM_WORLD, options);
  }

  // Uploads host data, runs `op` on the device copy, downloads the result.
  template <typename Op>
  std::vector<float> on_device(const std::vector<float>& host, Op op) {
    float* dev = nullptr;
    EXPECT_EQ(cudaMalloc(&dev, std::max<size_t>(1, host.size()) * sizeof(float)), cudaSuccess);
    cudaMemcpy(dev, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
    op(dev);
    std::vector<float> out(host.size());
    cudaMemcpy(out.data(), dev, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dev);
    return out;
  }

  std::unique_ptr<Communicator> comm_;
};

float value(int r, size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>(i % 7));
}

TEST_F(NcclTest, AllReduceSumAndAvg) {
  const int n = comm_->size();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    std::vector<float> in(100003);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(comm_->rank(), i);
    auto out = on_device(
        in, [&](float* dev) { comm_->all_reduce(dev, in.size(), DType::kFloat32, op)->wait(); });
    for (size_t i = 0; i < in.size(); ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += value(r, i);
      if (op == ReduceOp::kAvg) want /= static_cast<float>(n);
      ASSERT_FLOAT_EQ(out[i], want) << "element " << i;
    }
  }
}

TEST_F(NcclTest, UnevenReduceScatterAndAllGather) {
  const int n = comm_->size();
  const int rank = comm_->rank();
  std::vector<size_t> counts(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) counts[static_cast<size_t>(r)] = r % 2 ? 1000 + r : 0;
  const size_t total = shard_offset(counts, n);
  std::vector<float> in(total);
  for (size_t i = 0; i < total; ++i) in[i] = value(rank, i);
  auto scattered = on_device(in, [&](float* dev) {
    comm_->reduce_scatter(dev, counts, DType::kFloat32, ReduceOp::kSum)->wait();
  });
  const size_t own = shard_offset(counts, rank);
  for (size_t i = own; i < own + counts[static_cast<size_t>(rank)]; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += value(r, i);
    ASSERT_EQ(scattered[i], want) << "element " << i;
  }
  auto gathered =
      on_device(in, [&](float* dev) { comm_->all_gather(dev, counts, DType::kFloat32)->wait(); });
  for (int s = 0; s < n; ++s) {
    for (size_t i = shard_offset(counts, s); i < shard_offset(counts, s + 1); ++i) {
      ASSERT_EQ(gathered[i], value(s, i)) << "element " << i;
    }
  }
  comm_->barrier();
  EXPECT_EQ(comm_->sequence(), 3u);
}

// allocate() zeroes the memory on the communicator's stream and waits for that alone: work held
// up on another stream (here a host function that blocks until released; in a job, a
// collective a stalled peer never joins) neither delays it nor hangs it, where the
// cudaDeviceSynchronize it used to make waited for every stream.
TEST_F(NcclTest, AllocateWaitsForItsOwnStreamNotTheWholeDevice) {
  const size_t floats = 1 << 20, bytes = floats * sizeof(float);
  // Dirty memory, freed: the allocation below likely gets these pages back, so that its zeros
  // come from allocate's memset rather than from the driver's fresh pages.
  void* dirty = nullptr;
  ASSERT_EQ(cudaMalloc(&dirty, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(dirty, 0xFF, bytes), cudaSuccess);
  ASSERT_EQ(cudaFree(dirty), cudaSuccess);

  // A host function holds `stream` until `release`: set by the test once allocate returned, by
  // `releaser` after 20 s (so that a regression fails below instead of hanging), and by the
  // destructor on any way out, which also drains and destroys the stream.
  struct Hold {
    std::atomic<bool> release{false};
    cudaStream_t stream = nullptr;
    std::thread releaser;
    ~Hold() {
      release = true;
      if (releaser.joinable()) releaser.join();
      if (stream != nullptr) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
      }
    }
  } hold;
  ASSERT_EQ(cudaStreamCreateWithFlags(&hold.stream, cudaStreamNonBlocking), cudaSuccess);
  auto wait_for_release = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  ASSERT_EQ(cudaLaunchHostFunc(hold.stream, wait_for_release, &hold.release), cudaSuccess);
  hold.releaser = std::thread([&hold] {
    for (int i = 0; i < 2000 && !hold.release.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    hold.release = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto* memory = static_cast<float*>(comm_->allocate(bytes));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(hold.release.load()) << "allocate returned only once the other stream was released";
  EXPECT_LT(seconds, 10.0);
  hold.release = true;
  std::vector<float> host(floats, 1.0f);
  ASSERT_EQ(cudaMemcpy(host.data(), memory, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < floats; ++i) ASSERT_EQ(host[i], 0.0f) << "element " << i;
}

// Rank 0 cannot make NCCL's unique id (CTest runs this with NCCL_SOCKET_IFNAME naming no
// interface, collectives_nccl_startup_np2): every rank ends with rank 0's reason, none waits.
// The id is shared before any CUDA call, so this runs without a GPU too (in CI).
TEST(NcclStartup, EveryRankNamesWhyRankZeroCouldNotStartNccl) {
  const char* interface = std::getenv("NCCL_SOCKET_IFNAME");
  ASSERT_TRUE(interface != nullptr && std::string(interface).find("rm_no_such") == 0)
      << "run this with NCCL_SOCKET_IFNAME=rm_no_such_interface (its CTest entry sets it)";
  CommOptions options;
  options.timeout_s = 30;
  options.abort_on_error = false;  // throw, so that each rank's message can be checked
  NcclOptions nccl;
  nccl.device = 0;  // one GPU would do: the failure comes before the device is used
  try {
    make_nccl_communicator(MPI_COMM_WORLD, options, nccl);
    FAIL() << "the communicator started without a network interface for NCCL";
  } catch (const CollectiveError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 could not start NCCL: ncclGetUniqueId failed"), std::string::npos)
        << what;
    // NCCL's own reason, not only its error code's text ("no socket interface found" in 2.28).
    EXPECT_NE(what.find("interface"), std::string::npos) << what;
    EXPECT_EQ(what.find("timed out"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace rm

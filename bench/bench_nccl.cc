#include "bench/bench_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_table.h"
#include "collectives/nccl/nccl_check.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/nccl/nccl_plan.h"
#include "collectives/nccl/nccl_types.h"
#include "kernels/cuda/cuda_check.h"

namespace rm {
namespace {

// Ranks that see no GPU, agreed by all ranks before anything is created (so that no rank is left
// waiting in NCCL's bootstrap for one that gave up). Rank 0 prints the one message.
bool every_rank_has_a_gpu(MPI_Comm comm) {
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  const int missing = rc != cudaSuccess || devices == 0 ? 1 : 0;
  int missing_ranks = 0;
  MPI_Allreduce(&missing, &missing_ranks, 1, MPI_INT, MPI_SUM, comm);
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  if (missing_ranks > 0 && rank == 0) {
    std::fprintf(stderr,
                 "bench allreduce --backend nccl: no GPU visible on %d of %d ranks (rank 0: %s); "
                 "run it where every rank has a GPU, or use the mpi backend\n",
                 missing_ranks, world,
                 rc != cudaSuccess ? cudaGetErrorString(rc)
                 : devices == 0    ? "0 devices"
                                   : "ok");
  }
  return missing_ranks == 0;
}

// A plain blocking NCCL communicator and stream for the baseline: what a user of NCCL would
// write, with nothing of Ringmaster's in between.
class RawNccl {
 public:
  explicit RawNccl(MPI_Comm comm) {
    int rank = 0;
    int world = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    ncclUniqueId id;
    if (rank == 0) RM_NCCL_CHECK(ncclGetUniqueId(&id), cuda::kThrow);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    RM_NCCL_CHECK(ncclCommInitRank(&comm_, world, id, rank), cuda::kThrow);
    RM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cuda::kThrow);
  }
  ~RawNccl() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  RawNccl(const RawNccl&) = delete;
  RawNccl& operator=(const RawNccl&) = delete;

  void all_reduce(char* buf, size_t count, DType dtype) {
    RM_NCCL_CHECK(
        ncclAllReduce(buf, buf, count, to_nccl(nccl_type_of(dtype)), ncclSum, comm_, stream_),
        cuda::kThrow);
    RM_CUDA_CHECK(cudaStreamSynchronize(stream_), cuda::kThrow);
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

int run_nccl_allreduce_bench(MPI_Comm comm, const BenchOptions& options) {
  if (!every_rank_has_a_gpu(comm)) return 2;
  const DType dtype = options.dtype;
  // Selects this rank's device (cudaSetDevice); the baseline's communicator then uses it too.
  std::unique_ptr<Communicator> communicator = make_nccl_communicator(comm, options.comm);
  char* buf = static_cast<char*>(communicator->allocate(std::max<size_t>(options.max_bytes, 1)));
  std::unique_ptr<RawNccl> raw;
  if (options.compare_mpi) raw = std::make_unique<RawNccl>(comm);

  std::vector<detail::BenchImpl> impls;
  impls.push_back({"ringmaster", buf, [&](char* b, size_t count) {
                     communicator->all_reduce(b, count, dtype, ReduceOp::kSum)->wait();
                   }});
  if (raw) {
    impls.push_back(
        {"ncclAllReduce", buf, [&](char* b, size_t count) { raw->all_reduce(b, count, dtype); }});
  }
  detail::BenchAccess access;
  access.upload = [](char* device, const char* host, size_t bytes) {
    RM_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), cuda::kThrow);
  };
  access.download = [](char* host, const char* device, size_t bytes) {
    RM_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), cuda::kThrow);
  };
  std::string what =
      "ringmaster: the nccl backend on a device buffer from Communicator::allocate()";
  if (raw) what += "; ncclAllReduce in place on the same buffer, synchronised per call";
  const int rc = detail::run_bench_table(comm, options, std::move(impls), what,
                                         raw ? "NCCL" : nullptr, access);
  raw.reset();
  communicator.reset();
  return rc;
}

}  // namespace rm

#include "bench/bench_allreduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_table.h"

namespace rm {

const char* bench_collective_name(BenchCollective c) {
  switch (c) {
    case BenchCollective::kAllReduce:
      return "all-reduce";
    case BenchCollective::kReduceScatter:
      return "reduce-scatter";
    case BenchCollective::kAllGather:
      return "all-gather";
  }
  return "?";
}

namespace {

// One call of the benchmarked collective on `comm` (in place, sum, shards of shard_counts).
void run_collective(Communicator& comm, BenchCollective c, char* buf, size_t count, DType dtype) {
  switch (c) {
    case BenchCollective::kAllReduce:
      return comm.all_reduce(buf, count, dtype, ReduceOp::kSum)->wait();
    case BenchCollective::kReduceScatter:
      return comm.reduce_scatter(buf, shard_counts(count, comm.size()), dtype, ReduceOp::kSum)
          ->wait();
    case BenchCollective::kAllGather:
      return comm.all_gather(buf, shard_counts(count, comm.size()), dtype)->wait();
  }
}

// The same with MPI's own collectives, leaving the same result in the same place.
void run_mpi(MPI_Comm comm, BenchCollective c, char* buf, size_t count, DType dtype) {
  const MPI_Datatype type = dtype == DType::kFloat32 ? MPI_FLOAT : MPI_DOUBLE;
  if (c == BenchCollective::kAllReduce) {
    MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), type, MPI_SUM, comm);
    return;
  }
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  const std::vector<size_t> shards = shard_counts(count, world);
  std::vector<int> counts(shards.begin(), shards.end()), displs;
  for (int r = 0; r < world; ++r) displs.push_back(static_cast<int>(shard_offset(shards, r)));
  if (c == BenchCollective::kAllGather) {
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), displs.data(), type,
                   comm);
    return;
  }
  // In place, MPI leaves this rank's shard at the start of buf; ours is at its offset.
  MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts.data(), type, MPI_SUM, comm);
  const size_t esize = dtype_size(dtype);
  std::memmove(buf + shard_offset(shards, rank) * esize, buf, shards[static_cast<size_t>(rank)] * esize);
}

const char* mpi_name(BenchCollective c) {
  return c == BenchCollective::kAllReduce       ? "MPI_Allreduce"
         : c == BenchCollective::kReduceScatter ? "MPI_Reduce_scatter"
                                                : "MPI_Allgatherv";
}

}  // namespace

int run_allreduce_bench(MPI_Comm comm, const BenchOptions& options) {
  const DType dtype = options.dtype;
  const BenchCollective collective = options.collective;
  std::unique_ptr<Communicator> communicator =
      make_mpi_communicator(comm, options.comm, options.mpi);

  // Buffers for every size, touched once here: one from Communicator::allocate() (registered:
  // the one-pass path), one ordinary (staged path, and plain MPI's).
  const size_t capacity = (std::max<size_t>(options.max_bytes, 1) + 4095) / 4096 * 4096;
  char* registered = static_cast<char*>(communicator->allocate(capacity));
  std::unique_ptr<char, decltype(&std::free)> holder(
      static_cast<char*>(std::aligned_alloc(4096, capacity)), &std::free);
  char* plain = holder.get();
  std::memset(plain, 0, capacity);

  std::vector<detail::BenchImpl> impls;
  impls.push_back({"ringmaster", registered, [&](char* buf, size_t count) {
                     run_collective(*communicator, collective, buf, count, dtype);
                   }});
  if (options.plain_buffer) {
    impls.push_back({"ringmaster, plain buffer", plain, impls[0].run});
  }
  // Across hosts, the hierarchy's other inter-host layout too (hier_path.h): one leader per host
  // carrying all of the host's bytes, against the default's one rail per local rank (all-reduce
  // only: the other two take the rails in both layouts).
  const bool hierarchical = communicator->describe().find("hierarchical") != std::string::npos;
  std::unique_ptr<Communicator> leaders;
  if (hierarchical && options.mpi.hier_layout == detail::HierLayout::kRails &&
      collective == BenchCollective::kAllReduce) {
    MpiOptions mpi = options.mpi;
    mpi.hier_layout = detail::HierLayout::kLeaders;
    leaders = make_mpi_communicator(comm, options.comm, mpi);
    char* leaders_buf = static_cast<char*>(leaders->allocate(capacity));
    impls.push_back({"ringmaster, host leaders", leaders_buf, [&](char* buf, size_t count) {
                       leaders->all_reduce(buf, count, dtype, ReduceOp::kSum)->wait();
                     }});
  }
  // MPI has no bf16 type (and its own sum would round differently): no baseline for bf16.
  const bool compare_mpi = options.compare_mpi && dtype != DType::kBFloat16;
  if (compare_mpi) {
    impls.push_back({mpi_name(collective), plain, [&](char* buf, size_t count) {
                       run_mpi(comm, collective, buf, count, dtype);
                     }});
  }
  std::string what = "ringmaster: " + communicator->describe() +
                     ";\n  on a buffer from Communicator::allocate()" +
                     (options.plain_buffer ? " and on an ordinary buffer" : "") +
                     (leaders ? "; with host leaders instead of rails" : "") + "; ";
  what += dtype != DType::kBFloat16
              ? std::string(mpi_name(collective)) + "(MPI_IN_PLACE) on an ordinary buffer"
              : std::string("no MPI baseline (MPI has no bfloat16)");
  const int rc = detail::run_bench_table(comm, options, std::move(impls), what,
                                         compare_mpi ? "MPI" : nullptr, {});
  leaders.reset();
  communicator.reset();
  return rc;
}

}  // namespace rm

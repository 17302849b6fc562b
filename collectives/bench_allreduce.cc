#include "collectives/bench_allreduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/bench_table.h"

namespace rm {

int run_allreduce_bench(MPI_Comm comm, const BenchOptions& options) {
  const DType dtype = options.dtype;
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
                     communicator->all_reduce(buf, count, dtype, ReduceOp::kSum)->wait();
                   }});
  if (options.plain_buffer) {
    impls.push_back({"ringmaster, plain buffer", plain, impls[0].run});
  }
  // Across hosts, the hierarchy's other inter-host layout too (hier_path.h): one leader per host
  // carrying all of the host's bytes, against the default's one rail per local rank.
  const bool hierarchical = communicator->describe().find("hierarchical") != std::string::npos;
  std::unique_ptr<Communicator> leaders;
  if (hierarchical && options.mpi.hier_layout == detail::HierLayout::kRails) {
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
    const MPI_Datatype mpi_dtype = dtype == DType::kFloat32 ? MPI_FLOAT : MPI_DOUBLE;
    impls.push_back({"MPI_Allreduce", plain, [&, mpi_dtype](char* buf, size_t count) {
                       MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), mpi_dtype, MPI_SUM,
                                     comm);
                     }});
  }
  std::string what = "ringmaster: " + communicator->describe() +
                     ";\n  on a buffer from Communicator::allocate()" +
                     (options.plain_buffer ? " and on an ordinary buffer" : "") +
                     (leaders ? "; with host leaders instead of rails" : "") + "; ";
  what += dtype != DType::kBFloat16 ? "MPI_Allreduce(MPI_IN_PLACE) on an ordinary buffer"
                                    : "no MPI_Allreduce baseline (MPI has no bfloat16)";
  const int rc = detail::run_bench_table(comm, options, std::move(impls), what,
                                         compare_mpi ? "MPI" : nullptr, {});
  leaders.reset();
  communicator.reset();
  return rc;
}

}  // namespace rm

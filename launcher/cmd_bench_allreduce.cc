// `ringmaster bench allreduce [--np N] [--max-mb M] [--backend mpi|nccl] [--op OP]`: nccl-tests
// style rows for Ringmaster's communicator beside plain MPI_Allreduce (--op reduce_scatter or
// all_gather: those collectives beside MPI's own; with --backend nccl, all-reduce beside a raw
// ncclAllReduce loop on the same device buffers) in the same run, every result checked.
//
// Open MPI's own large all-reduce allocates temporaries on every call, which glibc can back
// with huge pages: `--hugetlb` runs the ranks with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, the
// better of the two baselines on our machines; compare both runs' MPI rows to Ringmaster's.
#include <cstdlib>

#include "bench/bench_allreduce.h"
#ifdef RM_HAVE_NCCL
#include "bench/bench_nccl.h"
#endif
#include "base/error_report.h"
#include "base/exit_codes.h"
#include "launcher/child_process.h"
#include "launcher/cmd_common.h"
#include "launcher/mpi_launch.h"
#include "worker/mpi_bootstrap.h"

namespace rm {

int cmd_bench_allreduce(const BenchAllreduceArgs& args) {
  if (args.backend == "nccl" && args.op != "all_reduce") {  // before any rank starts
    print_error("bench allreduce --backend nccl: --op " + args.op + ": only all_reduce");
    return kExitBadInput;
  }
#ifndef RM_HAVE_NCCL
  if (args.backend == "nccl") {  // before any rank starts: one line, not mpirun's banner too
    print_error("bench allreduce --backend nccl: this build has no NCCL");
    return kExitBadInput;
  }
#endif
  if (!launched_by_mpi()) {
    return report_errors([&]() -> int {
      if (args.hugetlb) ::setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
      int nproc = args.nproc;
      const MpiLaunch launch = resolve_launch(args.hosts, args.nproc_given, nproc);
      return run_mpirun(launch, args.argv, SignalForwarding::kSame);
    });
  }
  MpiSession mpi;
  BenchOptions options;
  options.max_bytes = static_cast<size_t>(args.max_mb) << 20;
  options.seconds_per_size = args.seconds;
  options.collective = args.op == "reduce_scatter" ? BenchCollective::kReduceScatter
                       : args.op == "all_gather"   ? BenchCollective::kAllGather
                                                   : BenchCollective::kAllReduce;
  if (args.backend == "nccl") {
#ifdef RM_HAVE_NCCL
    return run_nccl_allreduce_bench(MPI_COMM_WORLD, options);
#endif
  }
  return run_allreduce_bench(MPI_COMM_WORLD, options);
}

}  // namespace rm

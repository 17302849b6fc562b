#include "collectives/bench_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace rm {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double max_over_ranks(double value, MPI_Comm comm) {
  double result = value;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, comm);
  return result;
}

template <typename T>
void fill_pattern(char* buf, size_t count, int rank) {
  T* data = reinterpret_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>((rank + 1) * static_cast<int>(i % 7));
}

// Elements that differ from the exact sum of (r+1) * (i % 7) over the ranks.
template <typename T>
long long count_wrong(const char* buf, size_t count, int world) {
  const T* data = reinterpret_cast<const T*>(buf);
  const int ranks_sum = world * (world + 1) / 2;
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    wrong += data[i] != static_cast<T>(ranks_sum * static_cast<int>(i % 7));
  }
  return wrong;
}

struct Result {
  double time_us = 0;
  long long wrong = 0;
};

struct Impl {
  const char* name;
  char* buf;
  std::function<void(char* buf, size_t count)> run;  // one blocking all-reduce of buf[0, count)
  Result result{};
  std::vector<double> round_times{};
};

}  // namespace

int run_allreduce_bench(MPI_Comm comm, const BenchOptions& options) {
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  const DType dtype = options.dtype;
  const size_t esize = dtype_size(dtype);
  const MPI_Datatype mpi_dtype = dtype == DType::kFloat32 ? MPI_FLOAT : MPI_DOUBLE;
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

  std::vector<Impl> impls;
  impls.push_back({"ringmaster", registered, [&](char* buf, size_t count) {
                     communicator->all_reduce(buf, count, dtype, ReduceOp::kSum)->wait();
                   }});
  if (options.plain_buffer) {
    impls.push_back({"ringmaster, plain buffer", plain, impls[0].run});
  }
  if (options.compare_mpi) {
    impls.push_back({"MPI_Allreduce", plain, [&](char* buf, size_t count) {
                       MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), mpi_dtype, MPI_SUM,
                                     comm);
                     }});
  }

  std::FILE* out = options.out;
  const double bus_factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
  if (rank == 0) {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    std::fprintf(out, "# all-reduce in place: %d ranks, %s, sum; GLIBC_TUNABLES=%s\n", world,
                 dtype_name(dtype), tunables ? tunables : "(unset)");
    std::fprintf(out,
                 "# ringmaster: the %s backend on a buffer from Communicator::allocate()%s; "
                 "MPI_Allreduce(MPI_IN_PLACE) on an ordinary buffer\n",
                 communicator->backend().c_str(),
                 options.plain_buffer ? " and on an ordinary buffer" : "");
    std::fprintf(out, "# time = median over %d rounds of the mean per call (slowest rank)\n",
                 options.rounds);
    std::fprintf(out, "#%11s %12s %6s %5s", "", "", "", "");
    for (const Impl& impl : impls) std::fprintf(out, "   %-29s", impl.name);
    std::fprintf(out, "\n#%11s %12s %6s %5s", "size", "count", "type", "redop");
    for (size_t i = 0; i < impls.size(); ++i) {
      std::fprintf(out, "   %9s %6s %6s %5s", "time(us)", "algbw", "busbw", "#wrong");
    }
    std::fprintf(out, "%s\n", options.compare_mpi ? "   busbw vs MPI" : "");
    std::fprintf(out, "#%11s %12s %6s %5s", "(B)", "(elements)", "", "");
    for (size_t i = 0; i < impls.size(); ++i) {
      std::fprintf(out, "   %9s %6s %6s %5s", "", "(GB/s)", "(GB/s)", "");
    }
    std::fprintf(out, "\n");
    std::fflush(out);
  }

  long long total_wrong = 0;
  std::vector<double> busbw_sum(impls.size(), 0.0);
  int rows = 0;
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
    const size_t count = bytes / esize;
    // Warm up, then size the timed loops from one probe call (the slowest rank's).
    double probe = 0;
    for (Impl& impl : impls) {
      for (int i = 0; i < options.warmup; ++i) impl.run(impl.buf, count);
      std::memset(impl.buf, 0, bytes);  // zeros stay zeros: the timed sums never overflow
      MPI_Barrier(comm);
      const double t0 = now_s();
      impl.run(impl.buf, count);
      probe = std::max(probe, max_over_ranks(now_s() - t0, comm));
      impl.round_times.clear();
    }
    const double per_round = options.seconds_per_size / options.rounds / impls.size();
    const long iters =
        std::clamp(static_cast<long>(per_round / std::max(probe, 1e-7)), 1L, 100000L);
    for (int round = 0; round < options.rounds; ++round) {
      for (Impl& impl : impls) {
        MPI_Barrier(comm);
        const double t0 = now_s();
        for (long i = 0; i < iters; ++i) impl.run(impl.buf, count);
        impl.round_times.push_back(max_over_ranks((now_s() - t0) / iters, comm));
      }
    }
    for (Impl& impl : impls) {
      std::sort(impl.round_times.begin(), impl.round_times.end());
      impl.result.time_us = impl.round_times[impl.round_times.size() / 2] * 1e6;
      // One checked call per size and implementation.
      if (dtype == DType::kFloat32) {
        fill_pattern<float>(impl.buf, count, rank);
      } else {
        fill_pattern<double>(impl.buf, count, rank);
      }
      impl.run(impl.buf, count);
      long long wrong = dtype == DType::kFloat32 ? count_wrong<float>(impl.buf, count, world)
                                                 : count_wrong<double>(impl.buf, count, world);
      long long sum = 0;
      MPI_Allreduce(&wrong, &sum, 1, MPI_LONG_LONG, MPI_SUM, comm);
      impl.result.wrong = sum;
      total_wrong += sum;
    }
    if (rank == 0) {
      std::fprintf(out, " %11zu %12zu %6s %5s", bytes, count, dtype_name(dtype), "sum");
      std::vector<double> busbw;
      for (size_t i = 0; i < impls.size(); ++i) {
        const Result& r = impls[i].result;
        const double algbw = bytes / (r.time_us * 1e-6) / 1e9;
        busbw.push_back(algbw * bus_factor);
        busbw_sum[i] += busbw.back();
        std::fprintf(out, "   %9.1f %6.2f %6.2f %5lld", r.time_us, algbw, busbw.back(), r.wrong);
      }
      if (options.compare_mpi) {
        std::fprintf(out, "  ");
        for (size_t i = 0; i + 1 < impls.size(); ++i) {
          std::fprintf(out, " %5.2fx", busbw[i] / busbw.back());
        }
      }
      std::fprintf(out, "\n");
      std::fflush(out);
    }
    ++rows;
  }
  if (rank == 0 && rows > 0) {
    std::fprintf(out, "# Avg bus bandwidth (GB/s):");
    for (size_t i = 0; i < impls.size(); ++i) {
      std::fprintf(out, " %s %.2f", impls[i].name, busbw_sum[i] / rows);
    }
    std::fprintf(out, "\n# Out of bounds values : %lld %s\n", total_wrong,
                 total_wrong == 0 ? "OK" : "FAILED");
    std::fflush(out);
  }
  communicator.reset();
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace rm

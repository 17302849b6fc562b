#include "bench/bench_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/bf16.h"

namespace rm::detail {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double max_over_ranks(double value, MPI_Comm comm) {
  double result = value;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, comm);
  return result;
}

// Inputs (rank+1) * (i % 7), as values of the dtype.
template <typename T>
T as(double v) {
  return static_cast<T>(v);
}
template <>
bf16 as<bf16>(double v) {
  return to_bf16(static_cast<float>(v));
}

template <typename T>
void fill_pattern(char* buf, size_t count, int rank) {
  T* data = reinterpret_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) data[i] = as<T>((rank + 1) * static_cast<int>(i % 7));
}

// Elements of this rank's result that differ from what the collective must leave: the exact
// sum of (r+1) * (i % 7) over the ranks (bf16: that sum rounded once, which is what a float
// accumulation of these integers rounds to) -- everywhere after an all-reduce, in this rank's
// shard after a reduce-scatter; after an all-gather, (s+1) * (i % 7) in every rank s's shard.
template <typename T>
long long count_wrong(BenchCollective c, const char* buf, size_t count, int rank, int world) {
  const T* data = reinterpret_cast<const T*>(buf);
  const int ranks_sum = world * (world + 1) / 2;
  const std::vector<size_t> shards = shard_counts(count, world);
  size_t begin = 0, end = count;
  if (c == BenchCollective::kReduceScatter) {
    begin = shard_offset(shards, rank);
    end = begin + shards[static_cast<size_t>(rank)];
  }
  long long wrong = 0;
  int owner = 0;  // all-gather: whose shard element i is in, and where the next one starts
  size_t next = shards.empty() ? 0 : shards[0];
  for (size_t i = begin; i < end; ++i) {
    while (c == BenchCollective::kAllGather && i >= next) next += shards[static_cast<size_t>(++owner)];
    const int factor = c == BenchCollective::kAllGather ? owner + 1 : ranks_sum;
    const T want = as<T>(factor * static_cast<int>(i % 7));
    wrong += std::memcmp(&data[i], &want, sizeof(T)) != 0;
  }
  return wrong;
}

void fill_pattern(DType dtype, char* buf, size_t count, int rank) {
  switch (dtype) {
    case DType::kFloat32:
      return fill_pattern<float>(buf, count, rank);
    case DType::kFloat64:
      return fill_pattern<double>(buf, count, rank);
    case DType::kBFloat16:
      return fill_pattern<bf16>(buf, count, rank);
  }
}

long long count_wrong(DType dtype, BenchCollective c, const char* buf, size_t count, int rank,
                      int world) {
  switch (dtype) {
    case DType::kFloat32:
      return count_wrong<float>(c, buf, count, rank, world);
    case DType::kFloat64:
      return count_wrong<double>(c, buf, count, rank, world);
    case DType::kBFloat16:
      return count_wrong<bf16>(c, buf, count, rank, world);
  }
  return 0;
}

struct Result {
  double time_us = 0;
  long long wrong = 0;
};

}  // namespace

int run_bench_table(MPI_Comm comm, const BenchOptions& options, std::vector<BenchImpl> impls,
                    const std::string& what, const char* baseline, const BenchAccess& access) {
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  const DType dtype = options.dtype;
  const size_t esize = dtype_size(dtype);
  std::vector<Result> results(impls.size());
  std::vector<std::vector<double>> round_times(impls.size());
  // Device buffers are filled and checked through a host copy, allocated once.
  std::vector<char> host(access.upload ? std::max<size_t>(options.max_bytes, 1) : 0);
  auto set = [&](const BenchImpl& impl, size_t bytes, size_t count, bool pattern) {
    char* dst = access.upload ? host.data() : impl.buf;
    if (pattern) {
      fill_pattern(dtype, dst, count, rank);
    } else {
      std::memset(dst, 0, bytes);
    }
    if (access.upload) access.upload(impl.buf, host.data(), bytes);
  };
  auto wrong_in = [&](const BenchImpl& impl, size_t bytes, size_t count) {
    const char* src = impl.buf;
    if (access.download) {
      access.download(host.data(), impl.buf, bytes);
      src = host.data();
    }
    return count_wrong(dtype, options.collective, src, count, rank, world);
  };

  std::FILE* out = options.out;
  const bool reduces = options.collective != BenchCollective::kAllGather;
  // nccl-tests' bus bandwidth: what crosses each link, so 0 with one rank (nothing does). The
  // ratio column compares algbw, which is the same ratio wherever busbw is not 0.
  const double bus_factor =
      (options.collective == BenchCollective::kAllReduce ? 2.0 : 1.0) * (world - 1) / world;
  if (rank == 0) {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    std::fprintf(out, "# %s in place: %d ranks, %s%s; GLIBC_TUNABLES=%s\n",
                 bench_collective_name(options.collective), world, dtype_name(dtype),
                 reduces ? ", sum" : "", tunables ? tunables : "(unset)");
    size_t begin = 0;
    while (begin < what.size()) {
      size_t end = what.find('\n', begin);
      if (end == std::string::npos) end = what.size();
      std::fprintf(out, "# %s\n", what.substr(begin, end - begin).c_str());
      begin = end + 1;
    }
    std::fprintf(out, "# time = median over %d rounds of the mean per call (slowest rank)\n",
                 options.rounds);
    std::fprintf(out, "#%11s %12s %6s %5s", "", "", "", "");
    for (const BenchImpl& impl : impls) std::fprintf(out, "   %-29s", impl.name);
    std::fprintf(out, "\n#%11s %12s %6s %5s", "size", "count", "type", "redop");
    for (size_t i = 0; i < impls.size(); ++i) {
      std::fprintf(out, "   %9s %6s %6s %5s", "time(us)", "algbw", "busbw", "#wrong");
    }
    if (baseline != nullptr) std::fprintf(out, "   algbw vs %s", baseline);
    std::fprintf(out, "\n");
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
    for (size_t k = 0; k < impls.size(); ++k) {
      BenchImpl& impl = impls[k];
      for (int i = 0; i < options.warmup; ++i) impl.run(impl.buf, count);
      set(impl, bytes, count, false);  // zeros stay zeros: the timed sums never overflow
      MPI_Barrier(comm);
      const double t0 = now_s();
      impl.run(impl.buf, count);
      probe = std::max(probe, max_over_ranks(now_s() - t0, comm));
      round_times[k].clear();
    }
    const double per_round = options.seconds_per_size / options.rounds / impls.size();
    const long iters =
        std::clamp(static_cast<long>(per_round / std::max(probe, 1e-7)), 1L, 100000L);
    for (int round = 0; round < options.rounds; ++round) {
      for (size_t k = 0; k < impls.size(); ++k) {
        BenchImpl& impl = impls[k];
        MPI_Barrier(comm);
        const double t0 = now_s();
        for (long i = 0; i < iters; ++i) impl.run(impl.buf, count);
        round_times[k].push_back(max_over_ranks((now_s() - t0) / iters, comm));
      }
    }
    for (size_t k = 0; k < impls.size(); ++k) {
      BenchImpl& impl = impls[k];
      std::sort(round_times[k].begin(), round_times[k].end());
      results[k].time_us = round_times[k][round_times[k].size() / 2] * 1e6;
      // One checked call per size and implementation.
      set(impl, bytes, count, true);
      impl.run(impl.buf, count);
      long long wrong = wrong_in(impl, bytes, count);
      long long sum = 0;
      MPI_Allreduce(&wrong, &sum, 1, MPI_LONG_LONG, MPI_SUM, comm);
      results[k].wrong = sum;
      total_wrong += sum;
    }
    if (rank == 0) {
      std::fprintf(out, " %11zu %12zu %6s %5s", bytes, count, dtype_name(dtype),
                   reduces ? "sum" : "none");
      std::vector<double> algbw;
      for (size_t i = 0; i < impls.size(); ++i) {
        const Result& r = results[i];
        algbw.push_back(bytes / (r.time_us * 1e-6) / 1e9);
        const double busbw = algbw.back() * bus_factor;
        busbw_sum[i] += busbw;
        std::fprintf(out, "   %9.1f %6.2f %6.2f %5lld", r.time_us, algbw.back(), busbw, r.wrong);
      }
      if (baseline != nullptr) {
        std::fprintf(out, "  ");
        for (size_t i = 0; i + 1 < impls.size(); ++i) {
          std::fprintf(out, " %5.2fx", algbw[i] / algbw.back());
        }
      }
      std::fprintf(out, "\n");
      std::fflush(out);
    }
    ++rows;
  }
  if (rank == 0 && rows > 0) {
    if (world == 1) {
      std::fprintf(out,
                   "# one rank: busbw is 0 (nccl-tests' convention: no byte crosses a link); "
                   "algbw and the ratios still compare the implementations\n");
    }
    std::fprintf(out, "# Avg bus bandwidth (GB/s):");
    for (size_t i = 0; i < impls.size(); ++i) {
      std::fprintf(out, " %s %.2f", impls[i].name, busbw_sum[i] / rows);
    }
    std::fprintf(out, "\n# Out of bounds values : %lld %s\n", total_wrong,
                 total_wrong == 0 ? "OK" : "FAILED");
    std::fflush(out);
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace rm::detail

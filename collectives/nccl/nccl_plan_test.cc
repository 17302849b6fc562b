// The nccl backend's call plans, checked on the host: every rank's plan is executed against
// simulated rank buffers with NCCL's semantics for each call (including what in-place means for
// it), and the buffers are compared with the layout the Communicator contract defines
// (shard_counts / shard_offset). Inputs are small integers, exact in every dtype (bf16 too), so
// the comparison is about where data goes, not about rounding.
#include "collectives/nccl/nccl_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collectives/reduce_kernels.h"
#include "kernels/bf16.h"

namespace rm {
namespace {

constexpr DType kDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kBFloat16};

void put(DType dtype, std::vector<char>& buf, size_t i, double v) {
  char* p = buf.data() + i * dtype_size(dtype);
  if (dtype == DType::kFloat32) {
    const float f = static_cast<float>(v);
    std::memcpy(p, &f, sizeof f);
  } else if (dtype == DType::kFloat64) {
    std::memcpy(p, &v, sizeof v);
  } else {
    const bf16 b = to_bf16(static_cast<float>(v));
    std::memcpy(p, &b, sizeof b);
  }
}

double get(DType dtype, const std::vector<char>& buf, size_t i) {
  const char* p = buf.data() + i * dtype_size(dtype);
  if (dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
  if (dtype == DType::kFloat64) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return d;
  }
  bf16 b;
  std::memcpy(&b, p, sizeof b);
  return to_float(b);
}

// Rank r's input at element i: integers in [-20, 29], so sums over 4 ranks are exact in bf16.
double input(int r, size_t i) {
  return static_cast<double>((i * 7 + static_cast<size_t>(r) * 11) % 50) - 20;
}
constexpr double kSentinel = -999;  // where no rank's data should land

// NCCL's semantics, executed on the host. plans[r] is rank r's plan, bufs[r] its buffer. Returns
// "" or what is wrong: ranks whose calls do not match (NCCL would hang or mix data), a call
// outside the buffer, or send and receive ranges that overlap other than as NCCL defines
// in-place for that call (undefined behaviour in NCCL).
std::string execute(const std::vector<std::vector<NcclCall>>& plans,
                    std::vector<std::vector<char>>& bufs, DType dtype) {
  const int n = static_cast<int>(plans.size());
  const size_t esize = dtype_size(dtype);
  for (int r = 1; r < n; ++r) {
    if (plans[r].size() != plans[0].size()) return "ranks plan different numbers of calls";
  }
  for (size_t k = 0; k < plans[0].size(); ++k) {
    const NcclCall& c0 = plans[0][k];
    const std::string where =
        "call " + std::to_string(k) + " (" + nccl_call_kind_name(c0.kind) + ")";
    if (c0.type != nccl_type_of(dtype)) return where + ": wrong datatype";
    for (int r = 1; r < n; ++r) {
      const NcclCall& c = plans[r][k];
      if (c.kind != c0.kind || c.count != c0.count || c.root != c0.root || c.type != c0.type) {
        return where + ": rank " + std::to_string(r) + " issues a different call";
      }
    }
    const bool rooted = c0.kind == NcclCallKind::kReduce || c0.kind == NcclCallKind::kBroadcast;
    if (rooted && (c0.root < 0 || c0.root >= n)) return where + ": bad root";
    const size_t count = c0.count;
    const size_t nn = static_cast<size_t>(n);
    const size_t send_elems = c0.kind == NcclCallKind::kReduceScatter ? nn * count : count;
    const size_t recv_elems = c0.kind == NcclCallKind::kAllGather ? nn * count : count;
    // Per rank: bounds and in-place legality; then a snapshot of every rank's input.
    std::vector<std::vector<char>> in(nn);
    for (int r = 0; r < n; ++r) {
      const NcclCall& c = plans[r][k];
      const size_t s0 = c.send_offset, s1 = s0 + send_elems * esize;
      const size_t r0 = c.recv_offset, r1 = r0 + recv_elems * esize;
      if (s1 > bufs[r].size() || r1 > bufs[r].size()) return where + ": outside the buffer";
      const bool overlap = s0 < r1 && r0 < s1 && count > 0;
      // NCCL's in-place forms (nccl.h): the only overlap it defines.
      const size_t block = static_cast<size_t>(r) * count * esize;
      bool in_place = s0 == r0;
      if (c.kind == NcclCallKind::kReduceScatter) in_place = r0 == s0 + block;
      if (c.kind == NcclCallKind::kAllGather) in_place = s0 == r0 + block;
      if (overlap && !in_place) {
        return where + ": rank " + std::to_string(r) + " overlaps send and recv out of place";
      }
      in[r].assign(bufs[r].begin() + static_cast<long>(s0),
                   bufs[r].begin() + static_cast<long>(s1));
    }
    auto reduce_into = [&](size_t block, char* dst) {  // sum over ranks of block `block` of in
      std::vector<const void*> srcs(nn);
      for (size_t r = 0; r < nn; ++r) srcs[r] = in[r].data() + block * count * esize;
      void* dsts[1] = {dst};
      detail::reduce_sources(dtype, ReduceOp::kSum, n, srcs.data(), count, 1, dsts);
    };
    for (int r = 0; r < n; ++r) {
      char* recv = bufs[r].data() + plans[r][k].recv_offset;
      switch (c0.kind) {
        case NcclCallKind::kAllReduce:
          reduce_into(0, recv);
          break;
        case NcclCallKind::kReduceScatter:
          reduce_into(static_cast<size_t>(r), recv);
          break;
        case NcclCallKind::kAllGather:
          for (size_t s = 0; s < nn; ++s)
            std::memcpy(recv + s * count * esize, in[s].data(), count * esize);
          break;
        case NcclCallKind::kReduce:
          if (r == c0.root) reduce_into(0, recv);
          break;
        case NcclCallKind::kBroadcast:
          std::memcpy(recv, in[static_cast<size_t>(c0.root)].data(), count * esize);
          break;
      }
    }
  }
  return "";
}

// Buffers of `total` elements per rank: rank r's input where `own(r, i)` says, the sentinel
// elsewhere.
template <typename Own>
std::vector<std::vector<char>> make_bufs(int n, size_t total, DType dtype, Own own) {
  std::vector<std::vector<char>> bufs(static_cast<size_t>(n),
                                      std::vector<char>(total * dtype_size(dtype)));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < total; ++i) put(dtype, bufs[r], i, own(r, i) ? input(r, i) : kSentinel);
  }
  return bufs;
}

double sum_over_ranks(int n, size_t i) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += input(r, i);
  return s;
}

// Shard layouts for n ranks: even, uneven (shard_counts), zeros, everything on one rank.
std::vector<std::vector<size_t>> layouts(int n) {
  std::vector<std::vector<size_t>> all;
  for (size_t total : {size_t{0}, size_t{1}, size_t{5}, size_t{8}, size_t{12}, size_t{1001}}) {
    all.push_back(shard_counts(total, n));
  }
  const size_t nn = static_cast<size_t>(n);
  std::vector<size_t> alternating(nn), last_only(nn, 0), first_zero(nn, 6);
  for (size_t r = 0; r < nn; ++r) alternating[r] = r % 2 ? 3 * r + 2 : 0;
  last_only.back() = 17;
  first_zero.front() = 0;
  all.push_back(alternating);
  all.push_back(last_only);
  all.push_back(first_zero);
  return all;
}

std::string describe(const std::vector<size_t>& counts, DType dtype) {
  std::string s = std::string(dtype_name(dtype)) + " counts {";
  for (size_t c : counts) s += std::to_string(c) + ",";
  return s + "}";
}

TEST(NcclPlan, ReduceScatterMatchesTheContractLayout) {
  for (int n = 1; n <= 4; ++n) {
    for (const auto& counts : layouts(n)) {
      for (DType dtype : kDtypes) {
        const size_t total = shard_offset(counts, n);
        auto bufs = make_bufs(n, total, dtype, [](int, size_t) { return true; });
        std::vector<std::vector<NcclCall>> plans;
        for (int r = 0; r < n; ++r) plans.push_back(plan_reduce_scatter(counts, r, dtype));
        ASSERT_EQ(execute(plans, bufs, dtype), "") << describe(counts, dtype);
        for (int r = 0; r < n; ++r) {
          const size_t begin = shard_offset(counts, r);
          for (size_t i = begin; i < begin + counts[static_cast<size_t>(r)]; ++i) {
            ASSERT_EQ(get(dtype, bufs[r], i), sum_over_ranks(n, i))
                << "rank " << r << " element " << i << ", " << describe(counts, dtype);
          }
        }
      }
    }
  }
}

TEST(NcclPlan, AllGatherMatchesTheContractLayout) {
  for (int n = 1; n <= 4; ++n) {
    for (const auto& counts : layouts(n)) {
      for (DType dtype : kDtypes) {
        const size_t total = shard_offset(counts, n);
        auto bufs = make_bufs(n, total, dtype, [&](int r, size_t i) {
          const size_t begin = shard_offset(counts, r);
          return i >= begin && i < begin + counts[static_cast<size_t>(r)];
        });
        std::vector<std::vector<NcclCall>> plans;
        for (int r = 0; r < n; ++r) plans.push_back(plan_all_gather(counts, r, dtype));
        ASSERT_EQ(execute(plans, bufs, dtype), "") << describe(counts, dtype);
        for (int r = 0; r < n; ++r) {
          for (int s = 0; s < n; ++s) {
            const size_t begin = shard_offset(counts, s);
            for (size_t i = begin; i < begin + counts[static_cast<size_t>(s)]; ++i) {
              ASSERT_EQ(get(dtype, bufs[r], i), input(s, i))
                  << "rank " << r << " slice of " << s << " element " << i << ", "
                  << describe(counts, dtype);
            }
          }
        }
      }
    }
  }
}

TEST(NcclPlan, AllReduceAndBroadcastMatchTheContract) {
  for (int n = 1; n <= 4; ++n) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{37}}) {
      for (DType dtype : kDtypes) {
        auto bufs = make_bufs(n, count, dtype, [](int, size_t) { return true; });
        std::vector<std::vector<NcclCall>> plans(static_cast<size_t>(n),
                                                 plan_all_reduce(count, dtype));
        ASSERT_EQ(execute(plans, bufs, dtype), "");
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(get(dtype, bufs[r], i), sum_over_ranks(n, i));
        }
        for (int root = 0; root < n; ++root) {
          auto b = make_bufs(n, count, dtype, [&](int r, size_t) { return r == root; });
          std::vector<std::vector<NcclCall>> p(static_cast<size_t>(n),
                                               plan_broadcast(count, dtype, root));
          ASSERT_EQ(execute(p, b, dtype), "");
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(get(dtype, b[r], i), input(root, i));
          }
        }
      }
    }
  }
}

// The shapes NCCL sees: one fused collective when shards are equal, per-shard calls otherwise,
// nothing for empty shards, the dtype mapped through.
TEST(NcclPlan, CallShapes) {
  const auto even = plan_reduce_scatter({4, 4, 4}, 2, DType::kBFloat16);
  ASSERT_EQ(even.size(), 1u);
  EXPECT_EQ(even[0].kind, NcclCallKind::kReduceScatter);
  EXPECT_EQ(even[0].send_offset, 0u);
  EXPECT_EQ(even[0].recv_offset, 2u * 4 * 2);
  EXPECT_EQ(even[0].count, 4u);
  EXPECT_EQ(even[0].type, NcclType::kBFloat16);

  const auto gather = plan_all_gather({3, 3}, 1, DType::kFloat64);
  ASSERT_EQ(gather.size(), 1u);
  EXPECT_EQ(gather[0].kind, NcclCallKind::kAllGather);
  EXPECT_EQ(gather[0].send_offset, 3u * 8);
  EXPECT_EQ(gather[0].recv_offset, 0u);

  const auto uneven = plan_reduce_scatter({2, 0, 5}, 0, DType::kFloat32);
  ASSERT_EQ(uneven.size(), 2u);
  EXPECT_EQ(uneven[0].kind, NcclCallKind::kReduce);
  EXPECT_EQ(uneven[0].root, 0);
  EXPECT_EQ(uneven[1].root, 2);
  EXPECT_EQ(uneven[1].send_offset, 2u * 4);
  EXPECT_EQ(uneven[1].recv_offset, 2u * 4);
  EXPECT_EQ(uneven[1].count, 5u);

  EXPECT_TRUE(plan_reduce_scatter({0, 0}, 1, DType::kFloat32).empty());
  EXPECT_TRUE(plan_all_gather({0, 0, 0}, 2, DType::kFloat32).empty());
  EXPECT_TRUE(plan_all_reduce(0, DType::kFloat32).empty());
  EXPECT_EQ(nccl_type_of(DType::kFloat32), NcclType::kFloat32);
  EXPECT_EQ(nccl_type_of(DType::kFloat64), NcclType::kFloat64);
  EXPECT_EQ(nccl_type_of(DType::kBFloat16), NcclType::kBFloat16);
}

// The simulator must catch what it is there to catch: a reduce-scatter whose receive offset is
// not NCCL's in-place position, and ranks that disagree about a call.
TEST(NcclPlan, SimulatorRejectsBrokenPlans) {
  const DType dtype = DType::kFloat32;
  std::vector<std::vector<NcclCall>> plans;
  for (int r = 0; r < 2; ++r) plans.push_back(plan_reduce_scatter({4, 4}, r, dtype));
  plans[1][0].recv_offset = 0;  // in place at rank 0's block: overlapping out of place
  auto bufs = make_bufs(2, 8, dtype, [](int, size_t) { return true; });
  EXPECT_NE(execute(plans, bufs, dtype).find("out of place"), std::string::npos);

  plans.clear();
  for (int r = 0; r < 2; ++r) plans.push_back(plan_all_gather({4, 4}, r, dtype));
  plans[0][0].count = 3;
  EXPECT_NE(execute(plans, bufs, dtype).find("different call"), std::string::npos);
}

}  // namespace
}  // namespace rm

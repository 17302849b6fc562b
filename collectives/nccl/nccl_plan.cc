#include "collectives/nccl/nccl_plan.h"

#include <stdexcept>

namespace rm {
namespace {

bool all_equal(const std::vector<size_t>& counts) {
  for (size_t c : counts) {
    if (c != counts.front()) return false;
  }
  return true;
}

NcclCall call(NcclCallKind kind, size_t send, size_t recv, size_t count, int root, DType dtype) {
  NcclCall c;
  c.kind = kind;
  c.send_offset = send;
  c.recv_offset = recv;
  c.count = count;
  c.root = root;
  c.type = nccl_type_of(dtype);
  return c;
}

// One call per non-empty shard r, in place on shard r, rooted at its owner.
std::vector<NcclCall> per_shard(NcclCallKind kind, const std::vector<size_t>& counts, DType dtype) {
  std::vector<NcclCall> calls;
  const size_t esize = dtype_size(dtype);
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    const size_t at = shard_offset(counts, static_cast<int>(r)) * esize;
    calls.push_back(call(kind, at, at, counts[r], static_cast<int>(r), dtype));
  }
  return calls;
}

}  // namespace

NcclType nccl_type_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return NcclType::kFloat32;
    case DType::kFloat64:
      return NcclType::kFloat64;
    case DType::kBFloat16:
      return NcclType::kBFloat16;
  }
  throw std::invalid_argument("nccl_type_of: unknown dtype");
}

const char* nccl_call_kind_name(NcclCallKind kind) {
  switch (kind) {
    case NcclCallKind::kAllReduce:
      return "all_reduce";
    case NcclCallKind::kReduceScatter:
      return "reduce_scatter";
    case NcclCallKind::kAllGather:
      return "all_gather";
    case NcclCallKind::kReduce:
      return "reduce";
    case NcclCallKind::kBroadcast:
      return "broadcast";
  }
  return "?";
}

std::vector<NcclCall> plan_all_reduce(size_t count, DType dtype) {
  if (count == 0) return {};
  return {call(NcclCallKind::kAllReduce, 0, 0, count, -1, dtype)};
}

std::vector<NcclCall> plan_reduce_scatter(const std::vector<size_t>& counts, int rank,
                                          DType dtype) {
  if (counts.empty() || !all_equal(counts)) {
    return per_shard(NcclCallKind::kReduce, counts, dtype);
  }
  if (counts.front() == 0) return {};
  const size_t own = shard_offset(counts, rank) * dtype_size(dtype);
  return {call(NcclCallKind::kReduceScatter, 0, own, counts.front(), -1, dtype)};
}

std::vector<NcclCall> plan_all_gather(const std::vector<size_t>& counts, int rank, DType dtype) {
  if (counts.empty() || !all_equal(counts)) {
    return per_shard(NcclCallKind::kBroadcast, counts, dtype);
  }
  if (counts.front() == 0) return {};
  const size_t own = shard_offset(counts, rank) * dtype_size(dtype);
  return {call(NcclCallKind::kAllGather, own, 0, counts.front(), -1, dtype)};
}

std::vector<NcclCall> plan_broadcast(size_t count, DType dtype, int root) {
  if (count == 0) return {};
  return {call(NcclCallKind::kBroadcast, 0, 0, count, root, dtype)};
}

}  // namespace rm

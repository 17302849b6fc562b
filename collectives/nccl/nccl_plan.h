// How the nccl backend turns each collective into NCCL calls, as plain data: host-only (no
// nccl.h), so the layout of every call -- offsets, counts, roots, datatype -- is unit-tested on
// machines without a GPU (nccl_plan_test.cc executes plans against simulated rank buffers).
// nccl_communicator.cc issues exactly the calls a plan lists, in order, in one NCCL group when
// there are several.
//
// Every offset is in bytes from the start of the caller's buffer on this rank; every count is in
// elements, as the NCCL call takes it (recvcount for ncclReduceScatter, sendcount for
// ncclAllGather). In-place calls follow NCCL's definitions:
//   all_reduce, reduce, broadcast: send == recv;
//   reduce_scatter: recv == send + rank * count (bytes: times the element size);
//   all_gather: send == recv + rank * count.
// Calls with count 0 are left out: every rank plans from the same counts, so every rank leaves
// out the same calls and the ranks' call lists still match one to one.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/communicator.h"

namespace rm {

enum class NcclCallKind { kAllReduce, kReduceScatter, kAllGather, kReduce, kBroadcast };
// NCCL's datatypes that the communicator uses (nccl_types.h maps them to ncclDataType_t).
enum class NcclType { kFloat32, kFloat64, kBFloat16 };

struct NcclCall {
  NcclCallKind kind = NcclCallKind::kAllReduce;
  size_t send_offset = 0;  // bytes
  size_t recv_offset = 0;  // bytes
  size_t count = 0;        // elements
  int root = -1;           // reduce and broadcast; -1 for the others
  NcclType type = NcclType::kFloat32;
};

NcclType nccl_type_of(DType dtype);
const char* nccl_call_kind_name(NcclCallKind kind);  // "reduce_scatter", ...

// One plan per Communicator operation, for `rank` of counts.size() (or `size`) ranks. Arguments
// as the Communicator takes them (checked by the caller: one count per rank, a valid root).
std::vector<NcclCall> plan_all_reduce(size_t count, DType dtype);
// Equal counts: one in-place ncclReduceScatter. Uneven: one in-place ncclReduce per shard, to
// its owner (NCCL's reduce-scatter needs equal blocks).
std::vector<NcclCall> plan_reduce_scatter(const std::vector<size_t>& counts, int rank, DType dtype);
// Equal counts: one in-place ncclAllGather. Uneven: one in-place ncclBroadcast per shard, from
// its owner.
std::vector<NcclCall> plan_all_gather(const std::vector<size_t>& counts, int rank, DType dtype);
std::vector<NcclCall> plan_broadcast(size_t count, DType dtype, int root);

}  // namespace rm

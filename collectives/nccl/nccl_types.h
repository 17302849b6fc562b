// The NCCL enums of a plan's datatype and of a reduction: the one place they are mapped (checked
// in nccl_types_test.cc where nccl.h is available).
#pragma once

#include <nccl.h>

#include "collectives/communicator.h"
#include "collectives/nccl/nccl_plan.h"

namespace rm {

inline ncclDataType_t to_nccl(NcclType type) {
  switch (type) {
    case NcclType::kFloat32:
      return ncclFloat32;
    case NcclType::kFloat64:
      return ncclFloat64;
    case NcclType::kBFloat16:
      return ncclBfloat16;
  }
  return ncclNumTypes;  // not reached: NCCL rejects it (ncclInvalidArgument)
}

// ncclAvg divides on the device; for bf16 NCCL's order of additions and roundings applies.
inline ncclRedOp_t to_nccl(ReduceOp op) {
  return op == ReduceOp::kSum ? ncclSum : ncclAvg;
}

}  // namespace rm

// The plan's datatypes and reductions as NCCL's enums (built where nccl.h is found; needs no GPU).
#include "collectives/nccl/nccl_types.h"

#include <gtest/gtest.h>

namespace rm {
namespace {

TEST(NcclTypes, DatatypesAndReductions) {
  EXPECT_EQ(to_nccl(nccl_type_of(DType::kFloat32)), ncclFloat32);
  EXPECT_EQ(to_nccl(nccl_type_of(DType::kFloat64)), ncclFloat64);
  EXPECT_EQ(to_nccl(nccl_type_of(DType::kBFloat16)), ncclBfloat16);
  EXPECT_EQ(to_nccl(ReduceOp::kSum), ncclSum);
  EXPECT_EQ(to_nccl(ReduceOp::kAvg), ncclAvg);
}

}  // namespace
}  // namespace rm

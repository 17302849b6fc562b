// Running a row-major GEMM request (gemm_args.h) on cuBLAS.
//
// Element types: fp32 x fp32 -> fp32 (TF32 tensor cores when Blas::allow_tf32, else full fp32),
// bf16 x bf16 -> bf16 and bf16 x bf16 -> fp32 (the accumulated weight gradient), always with
// fp32 accumulation and fp32 alpha/beta. Asynchronous on the handle's stream; a cuBLAS error or
// an invalid request throws before anything is queued.
#pragma once

#include <cublas_v2.h>
#include <library_types.h>

#include "kernels/bf16.h"
#include "kernels/cuda/gemm_args.h"

namespace rm::cuda {

struct Blas {
  cublasHandle_t handle = nullptr;  // its stream set to the compute stream
  bool allow_tf32 = false;
};

enum class GemmType { kF32, kBF16 };
template <typename T>
constexpr GemmType gemm_type();
template <>
constexpr GemmType gemm_type<float>() {
  return GemmType::kF32;
}
template <>
constexpr GemmType gemm_type<bf16>() {
  return GemmType::kBF16;
}

// The cuBLAS names of an element type and a transpose flag (cublas_gemm.cc and lt_gemm.cc).
cudaDataType_t cuda_data_type(GemmType t);
cublasOperation_t cublas_operation(GemmOp op);

// C = alpha op(A) op(B) + beta C, as described by g; A and B are of type ab, C of type c.
void gemm(const Blas& blas, const RowMajorGemm& g, GemmType ab, const void* A, const void* B,
          GemmType c, void* C);

template <typename TAB, typename TC>
void gemm(const Blas& blas, const RowMajorGemm& g, const TAB* A, const TAB* B, TC* C) {
  gemm(blas, g, gemm_type<TAB>(), A, B, gemm_type<TC>(), C);
}

}  // namespace rm::cuda

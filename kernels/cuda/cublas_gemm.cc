#include "kernels/cuda/cublas_gemm.h"

#include <library_types.h>

#include <stdexcept>

#include "kernels/cuda/cublas_check.h"

namespace rm::cuda {

cudaDataType_t cuda_data_type(GemmType t) {
  return t == GemmType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
}
cublasOperation_t cublas_operation(GemmOp op) {
  return op == GemmOp::kTrans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

void gemm(const Blas& blas, const RowMajorGemm& g, GemmType ab, const void* A, const void* B,
          GemmType c, void* C) {
  const CublasGemmArgs a = to_cublas(g);
  if (a.empty()) return;
  if (ab == GemmType::kF32 && c == GemmType::kBF16) {
    throw std::invalid_argument("rm::cuda gemm: fp32 inputs with a bf16 output are not supported");
  }
  if (C == nullptr || (a.k > 0 && (A == nullptr || B == nullptr))) {
    throw std::invalid_argument("rm::cuda gemm: null matrix");
  }
  // TF32 only where every operand is fp32: bf16 inputs already run on the tensor cores.
  const cublasComputeType_t compute =
      ab == GemmType::kF32 && blas.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // Column-major: cuBLAS's first operand is our B, its second our A (gemm_args.h).
  const void* first = B;
  const void* second = A;
  if (a.batch == 1) {
    RM_CUBLAS_CHECK(cublas().gemm_ex(
                        blas.handle, cublas_operation(a.op_a), cublas_operation(a.op_b), a.m, a.n,
                        a.k, &a.alpha, first, cuda_data_type(ab), a.lda, second, cuda_data_type(ab),
                        a.ldb, &a.beta, C, cuda_data_type(c), a.ldc, compute, CUBLAS_GEMM_DEFAULT),
                    kThrow);
  } else {
    RM_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(
                        blas.handle, cublas_operation(a.op_a), cublas_operation(a.op_b), a.m, a.n,
                        a.k, &a.alpha, first, cuda_data_type(ab), a.lda, a.stride_a, second,
                        cuda_data_type(ab), a.ldb, a.stride_b, &a.beta, C, cuda_data_type(c), a.ldc,
                        a.stride_c, a.batch, compute, CUBLAS_GEMM_DEFAULT),
                    kThrow);
  }
}

}  // namespace rm::cuda

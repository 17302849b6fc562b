// RM_CUBLAS_CHECK: the one check of a cuBLAS status, the twin of RM_CUDA_CHECK (cuda_check.h),
// with the same handlers:
//
//   RM_CUBLAS_CHECK(cublas().create(&handle), rm::cuda::kThrow);  // throws std::runtime_error
//
// on_error(call_text, error_text) must not return; the error text is cublasGetStatusString's,
// through the loaded library (cublas_library.h: a status to check means it is loaded).
#pragma once

#include <cublas_v2.h>

#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_check.h"

#define RM_CUBLAS_CHECK(call, on_error)                                    \
  do {                                                                     \
    const cublasStatus_t rm_cublas_rc = (call);                            \
    if (rm_cublas_rc != CUBLAS_STATUS_SUCCESS)                             \
      (on_error)(#call, ::rm::cuda::cublas().status_string(rm_cublas_rc)); \
  } while (0)

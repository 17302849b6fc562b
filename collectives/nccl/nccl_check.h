// RM_CUDA_CHECK and RM_NCCL_CHECK: every CUDA and NCCL call of the nccl backend goes through
// one of them, so a failure is reported with the rank, the operation and its sequence number
// (the handler adds those) and the library's own error text.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

// Evaluates `call`; unless it returns cudaSuccess, invokes on_error(call_text, error_text),
// which must not return (it aborts or throws).
#define RM_CUDA_CHECK(call, on_error)                                                 \
  do {                                                                                \
    const cudaError_t rm_cuda_rc = (call);                                            \
    if (rm_cuda_rc != cudaSuccess) (on_error)(#call, cudaGetErrorString(rm_cuda_rc)); \
  } while (0)

// As RM_CUDA_CHECK for NCCL. ncclInProgress is not an error: the communicator is non-blocking
// and polls ncclCommGetAsyncError until the call has been enqueued.
#define RM_NCCL_CHECK(call, on_error)                                \
  do {                                                               \
    const ncclResult_t rm_nccl_rc = (call);                          \
    if (rm_nccl_rc != ncclSuccess && rm_nccl_rc != ncclInProgress) { \
      (on_error)(#call, ncclGetErrorString(rm_nccl_rc));             \
    }                                                                \
  } while (0)

// RM_NCCL_CHECK: every NCCL call of the nccl backend goes through it, so a failure is reported
// with the rank, the operation and its sequence number (the handler adds those) and NCCL's own
// error text. CUDA runtime calls use the project's one RM_CUDA_CHECK (kernels/cuda/cuda_check.h),
// with the same handlers: both macros call on_error(call_text, error_text).
#pragma once

#include <nccl.h>

#include "kernels/cuda/cuda_check.h"

// Evaluates `call`; unless it returns ncclSuccess, invokes on_error(call_text, error_text), which
// must not return (it aborts or throws). ncclInProgress is not an error: the communicator is
// non-blocking and polls ncclCommGetAsyncError until the call has been enqueued.
#define RM_NCCL_CHECK(call, on_error)                                \
  do {                                                               \
    const ncclResult_t rm_nccl_rc = (call);                          \
    if (rm_nccl_rc != ncclSuccess && rm_nccl_rc != ncclInProgress) { \
      (on_error)(#call, ncclGetErrorString(rm_nccl_rc));             \
    }                                                                \
  } while (0)

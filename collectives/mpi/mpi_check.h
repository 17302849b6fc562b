// RM_MPI_CHECK: every MPI call of the mpi backend goes through it, so a failure is reported
// with the rank, the operation and its sequence number instead of MPI's default handler
// killing the job with a bare code. The communicator sets MPI_ERRORS_RETURN for this to work.
#pragma once

#include <mpi.h>

#include <string>

namespace rm::detail {

// MPI's text for an error code, e.g. "MPI_ERR_TRUNCATE: message truncated".
std::string mpi_error_string(int code);

// A handler for set-up calls made outside any operation: throws CollectiveError naming the
// rank, the call site and the MPI error.
struct ThrowMpiError {
  const char* where;  // e.g. "make_mpi_communicator"
  [[noreturn]] void operator()(const char* call, int code) const;
};

}  // namespace rm::detail

// Evaluates `call`; unless it returns MPI_SUCCESS, invokes on_error(call_text, code), which must
// not return (it aborts or throws).
#define RM_MPI_CHECK(call, on_error)                            \
  do {                                                          \
    const int rm_mpi_rc = (call);                               \
    if (rm_mpi_rc != MPI_SUCCESS) (on_error)(#call, rm_mpi_rc); \
  } while (0)

#include "collectives/mpi/mpi_check.h"

#include "collectives/communicator.h"

namespace rm::detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text, static_cast<size_t>(length));
}

void ThrowMpiError::operator()(const char* call, int code) const {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw CollectiveError("[rank " + std::to_string(rank) + "] " + where + ": " + call +
                        " failed: " + mpi_error_string(code));
}

}  // namespace rm::detail

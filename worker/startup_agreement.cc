#include "worker/startup_agreement.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/elapsed.h"

namespace rm {
namespace {

[[noreturn]] void fail(const char* what, const std::string& why) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::fprintf(stderr, "[rank %d/%d] start-up (%s): %s\n", rank, size, what, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

// Waits for `request` until the deadline, checking every result.
void finish(MPI_Request* request, const char* what) {
  const double timeout_s = startup_timeout_s();
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) fail(what, "MPI_Test failed: " + mpi_error_text(rc));
    if (done) return;
    const double waited = seconds_since(t0);
    if (waited > timeout_s) {
      char text[160];
      std::snprintf(text, sizeof text,
                    "timed out after %.0f s: some rank never reached it (stuck or dead before "
                    "training started)", waited);
      fail(what, text);
    }
    sched_yield();
  }
}

}  // namespace

double startup_timeout_s() {
  const char* env = std::getenv("RM_STARTUP_TIMEOUT_S");
  const double s = env != nullptr ? std::atof(env) : 0;
  return s > 0 ? s : kStartupTimeoutS;
}

int agree_int(int value, Agree how, const char* what) {
  // MPI_ERRORS_RETURN so that the results below are ours to check and to name (the default,
  // MPI_ERRORS_ARE_FATAL, would abort without saying which start-up step failed).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int result = value;
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(&value, &result, 1, MPI_INT, how == Agree::kMax ? MPI_MAX : MPI_MIN,
                                MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) fail(what, "MPI_Iallreduce failed: " + mpi_error_text(rc));
  finish(&request, what);
  return result;
}

int broadcast_int(int value, int root, const char* what) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ibcast(&value, 1, MPI_INT, root, MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) fail(what, "MPI_Ibcast failed: " + mpi_error_text(rc));
  finish(&request, what);
  return value;
}

std::vector<std::string> gather_text(const std::string& mine, const char* what) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(kGatherTextBytes * static_cast<size_t>(size), '\0');
  std::memcpy(all.data() + kGatherTextBytes * static_cast<size_t>(rank), mine.data(),
              std::min(mine.size(), kGatherTextBytes - 1));  // NUL-terminated
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc =
      MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(),
                     static_cast<int>(kGatherTextBytes), MPI_CHAR, MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) fail(what, "MPI_Iallgather failed: " + mpi_error_text(rc));
  finish(&request, what);
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r) {
    const char* text = all.data() + kGatherTextBytes * static_cast<size_t>(r);
    texts.emplace_back(text, strnlen(text, kGatherTextBytes));
  }
  return texts;
}

HostPlace place_on_host(const char* what) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char mine[kGatherTextBytes] = {};  // HOST_NAME_MAX is 64 on Linux; room to spare
  ::gethostname(mine, sizeof mine - 1);
  const std::vector<std::string> names = gather_text(mine, what);
  HostPlace place{0, 0, {}};
  std::vector<std::string> hosts;  // in the order of their first rank
  for (int r = 0; r < static_cast<int>(names.size()); ++r) {
    const std::string& host = names[static_cast<size_t>(r)];
    const auto it = std::find(hosts.begin(), hosts.end(), host);
    place.host_of_rank.push_back(static_cast<int>(it - hosts.begin()));
    if (it == hosts.end()) hosts.push_back(host);
    if (host != names[static_cast<size_t>(rank)]) continue;
    ++place.local_size;
    if (r < rank) ++place.local_rank;
  }
  return place;
}

}  // namespace rm

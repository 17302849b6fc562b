// The few collectives a job's ranks make before any Communicator exists (rank_main.cc): agreeing
// that every rank's checks passed, on the backend, and on whether the run resumes. Plain MPI on
// MPI_COMM_WORLD, but held to the never-hang rule like every other collective: non-blocking
// calls polled against a deadline, every MPI result checked, and a failure or a rank that never
// arrives ends the whole job with "[rank r/n] start-up (<what>): ..." and MPI_Abort (exit 1).
//
// The deadline is generous (kStartupTimeoutS) because ranks legitimately arrive far apart here:
// one may open a large dataset while rank 0 waits up to 90 s for the run lock.
//
// Every rank must make the same calls in the same order; main thread only.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rm {

// RM_STARTUP_TIMEOUT_S (seconds) overrides it: for tests, and for filesystems slower still.
inline constexpr double kStartupTimeoutS = 600;

enum class Agree { kMax, kMin };

// Every rank's `value` combined over all ranks (maximum or minimum).
int agree_int(int value, Agree how, const char* what);
// Root's `value` on every rank.
int broadcast_int(int value, int root, const char* what);
// Every rank's `mine`, by rank (each cut to kGatherTextBytes - 1 bytes).
inline constexpr size_t kGatherTextBytes = 256;
std::vector<std::string> gather_text(const std::string& mine, const char* what);

// This rank's place among the ranks on its host (same hostname): what MPI_Comm_split_type
// (MPI_COMM_TYPE_SHARED) would give, from a non-blocking all-gather of host names instead, so
// that a rank that never arrives ends the job rather than hanging it.
// host_of_rank[r]: rank r's host, numbered in the order of each host's first rank.
struct HostPlace {
  int local_rank = 0, local_size = 1;
  std::vector<int> host_of_rank = {0};
};
HostPlace place_on_host(const char* what);

// The deadline itself, in seconds: kStartupTimeoutS or RM_STARTUP_TIMEOUT_S.
double startup_timeout_s();

}  // namespace rm

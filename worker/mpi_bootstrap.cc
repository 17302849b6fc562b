#include "worker/mpi_bootstrap.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/deadline_guard.h"
#include "collectives/mpi/mpi_communicator.h"
#include "kernels/compute_factory.h"
#include "worker/startup_agreement.h"

namespace rm {
namespace {

constexpr double kFinalizeTimeoutS = 120;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

bool launched_by_mpi() {
  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; srun --mpi=pmix sets PMIX_RANK.
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

MpiSession::MpiSession() {
  if (!launched_by_mpi()) return;
  int provided = 0;
  {
    // MPI_Init waits for the launcher's other processes: bounded like every start-up step.
    DeadlineGuard guard(startup_timeout_s(), "MPI_Init",
                        "a process of the job never started, or the launcher lost it");
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      // The default error handler aborts before this; said here in case a build returns.
      std::fprintf(stderr, "ringmaster: MPI_Init_thread failed (error %d)\n", rc);
      std::exit(1);
    }
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  if (provided < MPI_THREAD_FUNNELED) {
    std::fprintf(stderr, "[rank %d/%d] start-up: the MPI library gives thread level %d, below "
                 "MPI_THREAD_FUNNELED, which the OpenMP kernels need\n", rank_, world_, provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const HostPlace place = place_on_host("ranks per host");
  local_rank_ = place.local_rank;
  local_size_ = place.local_size;
  host_of_rank_ = place.host_of_rank;
}

std::string MpiSession::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "";
  const std::string s(text, ::strnlen(text, sizeof text));  // len may count the NUL
  return s.substr(0, s.find_first_of("\r\n"));
}

MpiSession::~MpiSession() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  // Finalize may wait for peers; one that died or hangs in its shutdown must not hold this rank
  // (and its allocation) forever. The job's work is done and on disk by now.
  DeadlineGuard guard(kFinalizeTimeoutS, "MPI_Finalize", "a peer rank hangs or died while exiting");
  MPI_Finalize();
}

std::unique_ptr<Communicator> MpiSession::communicator(double timeout_s) const {
  CommOptions options;
  options.timeout_s = timeout_s;
  return make_mpi_communicator(MPI_COMM_WORLD, options);
}

std::string MpiSession::describe() const {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::string s = "rank " + std::to_string(rank_) + "/" + std::to_string(world_) + " (local " +
                  std::to_string(local_rank_) + "/" + std::to_string(local_size_) + ") on " + host;
  const std::string job = env_or("SLURM_JOB_ID", "");
  if (!job.empty()) {
    s += ", slurm job " + job + " (" + env_or("SLURM_JOB_NODELIST", "?") + "), restart " +
         env_or("SLURM_RESTART_COUNT", "0");
  }
  const std::string restart = env_or("RM_RESTART_COUNT", "0");
  if (restart != "0") s += ", ringmaster restart " + restart;
  return s;
}

int configure_threads(int threads_per_rank, int local_ranks) {
  int threads = threads_per_rank;
  if (threads <= 0) threads = std::atoi(env_or("SLURM_CPUS_PER_TASK", "0").c_str());
  if (threads <= 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, cores / std::max(1, local_ranks));
  }
  return set_host_threads(threads);
}

}  // namespace rm

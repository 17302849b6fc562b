#include "launcher/mpi_launch.h"

#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "collectives/mpi/mpi_communicator.h"
#include "launcher/child_process.h"

namespace rm {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

bool launched_by_mpi() {
  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; srun --mpi=pmix sets PMIX_RANK.
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

std::vector<std::string> mpirun_command(int nproc, const std::vector<std::string>& args) {
  // --bind-to none: each rank runs several OpenMP threads, which binding to one core would
  // serialise; --oversubscribe: more ranks than cores is allowed (tests, small machines).
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe",
                                   "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(self_path());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

MpiSession::MpiSession() {
  if (!launched_by_mpi()) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
}

MpiSession::~MpiSession() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
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
                  std::to_string(local_rank_) + "/" + std::to_string(local_size_) + ") on " +
                  host;
  const std::string job = env_or("SLURM_JOB_ID", "");
  if (!job.empty()) {
    s += ", slurm job " + job + " (" + env_or("SLURM_JOB_NODELIST", "?") + "), restart " +
         env_or("SLURM_RESTART_COUNT", "0");
  }
  const std::string restart = env_or("RM_RESTART_COUNT", "0");
  if (restart != "0") s += ", ringmaster restart " + restart;
  return s;
}

}  // namespace rm

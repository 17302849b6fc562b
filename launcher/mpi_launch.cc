#include "launcher/mpi_launch.h"

#include <mpi.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "collectives/mpi/mpi_communicator.h"

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

namespace {

volatile sig_atomic_t g_mpirun_pid = 0;
volatile sig_atomic_t g_signals_seen[NSIG] = {};

void forward_to_mpirun(int sig) {
  const pid_t pid = g_mpirun_pid;
  if (pid <= 0) return;
  // write(2) and kill(2) are async-signal-safe; printf is not.
  if (g_signals_seen[sig]++ == 0) {
    static const char msg[] =
        "ringmaster: signal received: the ranks checkpoint and stop after this step "
        "(send it again to kill them)\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::kill(pid, SIGUSR1);
  } else {
    static const char msg[] = "ringmaster: second signal: killing the job\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::kill(-pid, SIGKILL);
  }
}

}  // namespace

int run_under_mpirun(int nproc, const std::vector<std::string>& args) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw std::runtime_error(std::string("cannot find own binary: ") + std::strerror(errno));
  self[n] = '\0';
  // --bind-to none: each rank runs several OpenMP threads, which binding to one core would
  // serialise; --oversubscribe: more ranks than cores is allowed (tests, small machines).
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe",
                                   "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);

  // The stop signals are blocked across the fork: one arriving before the parent knows the
  // child's pid stays pending until it does, and the child restores the defaults before
  // unblocking them and exec'ing.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_to_mpirun;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    ::sigaction(sig, &sa, nullptr);
    sigaddset(&stop_signals, sig);
  }
  ::sigprocmask(SIG_BLOCK, &stop_signals, &previous);
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // In its own process group mpirun no longer dies with a `kill -9` of this process (or of
    // its group), so it is told to: SIGTERM, on which it stops the ranks.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    ::setpgid(0, 0);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    ::execvp("mpirun", c.data());
    std::fprintf(stderr, "ringmaster: cannot start mpirun (is openmpi-bin installed?): %s\n",
                 std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists
  g_mpirun_pid = pid;
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  g_mpirun_pid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
  return s;
}

}  // namespace rm

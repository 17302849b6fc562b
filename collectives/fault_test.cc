// Kill and stall tests: start a real job (mpirun -np 2 collectives_fault_worker) in which one
// rank stalls, stops (SIGSTOP) or dies (SIGKILL) during an all-reduce, and check that the job
// fails -- non-zero exit, within timeout + 30 s, far below the stall -- with a message naming the
// operation and its sequence number. The worker's timeout is 2 s.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr double kTimeoutS = 2;  // the worker's CommOptions::timeout_s
constexpr double kSlackS = 30;   // allowed on top of it (mpirun under ASan, a loaded machine)
constexpr double kGiveUpS = 90;  // kill the job: it hung

struct JobResult {
  int exit_code = -1;  // or 128 + signal
  double seconds = 0;
  std::string output;  // stdout and stderr of mpirun and the ranks
};

// Runs mpirun -np 2 <worker> with the test hooks exported; kills the job past kGiveUpS.
JobResult run_job(const std::string& fault, const std::string& algorithm,
                  const std::string& buffer) {
  std::vector<std::string> args = {RM_MPIEXEC, RM_MPIEXEC_NUMPROC_FLAG, "2"};
  std::istringstream flags(RM_MPIEXEC_FLAGS);
  for (std::string flag; flags >> flag;) args.push_back(flag);
  for (const char* name :
       {"RM_TEST_FAULT", "RM_TEST_STALL_RANK", "RM_TEST_STALL_SECONDS", "RM_TEST_ALGORITHM"}) {
    args.push_back("-x");
    args.push_back(name);
  }
  args.push_back(RM_FAULT_WORKER);

  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // the job gets its own group, so a hung one can be killed whole
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    setenv("RM_TEST_FAULT", fault.c_str(), 1);
    setenv("RM_TEST_STALL_RANK", "1", 1);
    setenv("RM_TEST_STALL_SECONDS", "60", 1);
    setenv("RM_TEST_ALGORITHM", algorithm.c_str(), 1);
    setenv("RM_TEST_BUFFER", buffer.c_str(), 1);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  JobResult result;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (;;) {
    pollfd fd{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&fd, 1, 200);
    if (ready > 0) {
      char chunk[4096];
      const ssize_t n = read(pipe_fds[0], chunk, sizeof(chunk));
      if (n <= 0) break;  // EOF: every process of the job has closed the pipe
      result.output.append(chunk, static_cast<size_t>(n));
    }
    if (elapsed() > kGiveUpS) {
      kill(-pid, SIGKILL);
      result.output += "\n[fault_test] job hung; killed\n";
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.seconds = elapsed();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  kill(-pid, SIGKILL);  // leftovers, if any
  return result;
}

// expected_text: substrings the output must hold; expected_pattern (when not empty): an
// ECMAScript regex it must match somewhere.
void expect_job_fails(const std::string& fault, const std::string& algorithm,
                      const std::string& buffer, const std::vector<std::string>& expected_text,
                      const std::string& expected_pattern = "") {
  const JobResult job = run_job(fault, algorithm, buffer);
  SCOPED_TRACE("job output:\n" + job.output);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_LT(job.seconds, kTimeoutS + kSlackS);
  EXPECT_EQ(job.output.find("all operations completed"), std::string::npos);
  for (const auto& text : expected_text) {
    EXPECT_NE(job.output.find(text), std::string::npos) << "missing: " << text;
  }
  if (!expected_pattern.empty()) {
    EXPECT_TRUE(std::regex_search(job.output, std::regex(expected_pattern)))
        << "no match for: " << expected_pattern;
  }
  std::printf("%s[fault_test] %s/%s/%s: exit %d after %.1f s\n", job.output.c_str(), fault.c_str(),
              algorithm.c_str(), buffer.c_str(), job.exit_code, job.seconds);
}

// Shared memory: the staged path for the stall, the registered (allocate()) path for the stop.
TEST(FaultTest, StallShm) {
  expect_job_fails("stall", "auto", "plain",
                   {"[rank 0/2] all_reduce(seq=4, bytes=1048576, timeout=2s) timed out after",
                    "waiting for rank 1"});
}

TEST(FaultTest, StallMpi) {
  expect_job_fails("stall", "mpi", "plain",
                   {"[rank 0/2] all_reduce(seq=4, bytes=1048576, timeout=2s) timed out after"});
}

// The victim issues its fourth all-reduce and calls test() once before it stops. That one call
// may already complete it for rank 0 (on the registered path one pass does all the work; under
// MPI the victim's contribution may be sent by then -- CI saw it), so rank 0 times out in it or
// in the next, the first operation the stopped rank cannot join. With a registered buffer,
// allocate() was seq=1 (fault_worker.cc): the fourth all-reduce is seq=5.
constexpr const char* kSigstopTimeout =
    R"(\[rank 0/2\] all_reduce\(seq=[45], bytes=1048576, timeout=2s\) timed out after)";
constexpr const char* kSigstopTimeoutRegistered =
    R"(\[rank 0/2\] all_reduce\(seq=[56], bytes=1048576, timeout=2s\) timed out after)";

TEST(FaultTest, SigstopShm) {
  expect_job_fails("sigstop", "auto", "registered", {"waiting for rank 1 (", "registered buffer)"},
                   kSigstopTimeoutRegistered);
}

TEST(FaultTest, SigstopMpi) {
  expect_job_fails("sigstop", "mpi", "plain", {}, kSigstopTimeout);
}

// allocate() meets the other ranks under the timeout before MPI's blocking window allocation:
// before, rank 0 waited inside MPI_Win_allocate_shared for as long as the victim slept.
TEST(FaultTest, StallBeforeAllocateShm) {
  expect_job_fails("stall_allocate", "auto", "registered",
                   {"[rank 0/2] allocate(seq=1, bytes=1048576, timeout=2s) timed out after",
                    "waiting for rank 1"});
}

// A rank that issues another collective than its peers: the shared-memory path compares what
// every rank announced before any rank reads another's bytes, and fails naming both (whichever
// of the two ranks says it first).
constexpr const char* kMismatch = "on the shared-memory path where rank";

TEST(FaultTest, AnotherOpOnOneRankIsNamedShm) {
  expect_job_fails("op", "auto", "plain",
                   {"all_reduce #4 (float, sum) of 262144 elements",
                    "all_reduce #4 (float, avg) of 262144 elements", kMismatch});
}

TEST(FaultTest, AnotherCountOnOneRankIsNamedShmRegistered) {
  expect_job_fails("short", "auto", "registered",
                   {"all_reduce #5 (float, avg) of 262080 elements",
                    "all_reduce #5 (float, avg) of 262144 elements", kMismatch});
}

// An extra collective of no elements moves nothing, so no rank waits for it; it still counts,
// and the victim's next all-reduce is numbered one ahead of its peers' (#6 against #5: allocate()
// was #1).
TEST(FaultTest, AnExtraEmptyCollectiveOnOneRankIsNamedShmRegistered) {
  expect_job_fails("empty", "auto", "registered",
                   {"all_reduce #6 (float, avg) of 262144 elements",
                    "all_reduce #5 (float, avg) of 262144 elements", kMismatch});
}

TEST(FaultTest, ABarrierWhereThePeersReduceIsNamedShm) {
  expect_job_fails("barrier", "auto", "plain",
                   {"barrier #4", "all_reduce #4 (float, avg) of 262144 elements", kMismatch});
}

// Open MPI usually notices the death first and ends the job: what these check is that no wait
// of the communicator (a spin on shared memory, a request polled) keeps the survivor from being
// ended, quickly, and that the death is the one said -- by mpiexec, or by the survivor's timeout.
constexpr const char* kSigkillSaid =
    R"(rank 1 with PID [0-9]+ on node \S+ exited on signal 9|\[rank 0/2\] .* timed out after)";

TEST(FaultTest, SigkillShm) {
  expect_job_fails("sigkill", "auto", "registered", {}, kSigkillSaid);
}

TEST(FaultTest, SigkillMpi) {
  expect_job_fails("sigkill", "mpi", "plain", {}, kSigkillSaid);
}

}  // namespace

// DeadlineGuard ends a process stuck past its deadline, saying what it waited for, and does
// nothing to one whose call returned in time. In forked children: the guard _exits.
#include "base/deadline_guard.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace rm {
namespace {

struct Child {
  int status = 0;
  std::string err;
  double seconds = 0;
};

// Runs body in a child whose stderr is captured; its exit status once it ends.
template <typename Body>
Child run_child(Body body) {
  int pipefd[2];
  EXPECT_EQ(::pipe(pipefd), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], STDERR_FILENO);
    ::close(pipefd[0]);
    body();
    ::_exit(0);
  }
  ::close(pipefd[1]);
  Child c;
  char buf[512];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) c.err.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  ::waitpid(pid, &c.status, 0);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

TEST(DeadlineGuard, EndsAStuckCallWithItsMessageAndExitCode) {
  const Child c = run_child([] {
    DeadlineGuard guard(0.3, "MPI_Init", "a process of the job never started", 7);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // the stuck call
  });
  ASSERT_TRUE(WIFEXITED(c.status));
  EXPECT_EQ(WEXITSTATUS(c.status), 7);
  EXPECT_LT(c.seconds, 10);
  EXPECT_NE(c.err.find("] MPI_Init did not return within 0.3 s (a process of the job never "
                       "started); ending this process"),
            std::string::npos)
      << c.err;
}

TEST(DeadlineGuard, ACallThatReturnsInTimeIsLeftAlone) {
  const Child c = run_child([] {
    {
      // 3 s of slack over the 50 ms call, for a loaded machine that descheduled this child.
      DeadlineGuard guard(3, "MPI_Finalize", "a peer hangs");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // past the deadline, disarmed
  });
  ASSERT_TRUE(WIFEXITED(c.status));
  EXPECT_EQ(WEXITSTATUS(c.status), 0);
  EXPECT_EQ(c.err, "");
}

}  // namespace
}  // namespace rm

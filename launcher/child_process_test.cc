// self_path() and started_from() (launcher/child_process.h): the path a process was started
// from, also once the file there has been replaced -- checked on a real process whose program
// is replaced under it, as an in-place upgrade of ringmaster during a long run would do.
#include "launcher/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace rm {
namespace {

namespace fs = std::filesystem;

TEST(StartedFrom, TakesTheKernelsDeletedSuffixOffAndNothingElse) {
  bool deleted = true;
  EXPECT_EQ(started_from("/opt/rm/bin/ringmaster", &deleted), "/opt/rm/bin/ringmaster");
  EXPECT_FALSE(deleted);
  EXPECT_EQ(started_from("/opt/rm/bin/ringmaster (deleted)", &deleted), "/opt/rm/bin/ringmaster");
  EXPECT_TRUE(deleted);
  EXPECT_EQ(started_from("/a/ringmaster (deleted) (deleted)", &deleted), "/a/ringmaster (deleted)");
  EXPECT_EQ(started_from(" (deleted)", &deleted), " (deleted)");  // no path before it
  EXPECT_FALSE(deleted);
  EXPECT_EQ(started_from("/a/b (deleted"), "/a/b (deleted");
}

TEST(StartedFrom, FindsThePathOfAProcessWhoseProgramWasReplaced) {
  char tmpl[] = "/tmp/rm-self-path-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl, prog = dir / "prog";
  fs::copy_file("/bin/sleep", prog);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // argv[0] "sleep": a multi-call binary (busybox, uutils) picks its program by that name.
    ::execl(prog.c_str(), "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct Reap {  // the child ends with the test, whichever assertion ends it
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  } reap{pid};
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  // Until the child has exec'd, its link names this test's program.
  std::error_code ec;
  for (int i = 0; i < 500 && fs::read_symlink(link, ec) != prog; ++i) ::usleep(10000);
  bool deleted = true;
  EXPECT_EQ(started_from(fs::read_symlink(link).string(), &deleted), prog.string());
  EXPECT_FALSE(deleted);
  // An upgrade: a new file renamed over the old one, which lives on only for the running process.
  fs::copy_file("/bin/sleep", dir / "prog.new");
  fs::rename(dir / "prog.new", prog);
  const std::string now = fs::read_symlink(link).string();
  EXPECT_NE(now, prog.string());  // the kernel's "PATH (deleted)"
  EXPECT_EQ(started_from(now, &deleted), prog.string()) << now;
  EXPECT_TRUE(deleted);
  fs::remove_all(dir);
}

TEST(SelfPath, IsThisTestsOwnProgram) {
  bool replaced = true;
  const std::string self = self_path(&replaced);
  EXPECT_FALSE(replaced);
  EXPECT_TRUE(fs::equivalent(self, "/proc/self/exe")) << self;
}

}  // namespace
}  // namespace rm

// A `ringmaster` process in the background for end-to-end tests that act on a run while it is
// running (signals, a second run on the same directory). Test-only; POSIX.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm::test {

struct Child {
  pid_t pid = -1;
  std::string out, err;  // files holding its stdout and stderr
};

// Starts RINGMASTER_BIN with `args` (shell words), its streams in `scratch`/<name>.out and .err;
// `env` is prepended as shell assignments ("A=1 B=2").
inline Child spawn_cli(const std::string& args, const std::string& scratch,
                       const std::string& name = "bg", const std::string& env = "") {
  Child c;
  c.out = scratch + "/" + name + ".out";
  c.err = scratch + "/" + name + ".err";
  c.pid = ::fork();
  if (c.pid == 0) {
    const std::string cmd =
        env + " exec " + std::string(RINGMASTER_BIN) + " " + args + " >" + c.out + " 2>" + c.err;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return c;
}

// Starts `sh -c script` in the background, its streams in `scratch`/<name>.out and .err.
inline Child spawn_shell(const std::string& script, const std::string& scratch,
                         const std::string& name = "sh") {
  Child c;
  c.out = scratch + "/" + name + ".out";
  c.err = scratch + "/" + name + ".err";
  c.pid = ::fork();
  if (c.pid == 0) {
    const std::string cmd = "exec >" + c.out + " 2>" + c.err + "; " + script;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return c;
}

// Waits until the file at `path` contains `text` (60 s at most).
inline bool wait_for_text(const std::string& path, const std::string& text) {
  for (int i = 0; i < 6000; ++i) {
    if (slurp(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Waits for the child; its exit code, or 128 + the signal that killed it.
inline int wait_exit(const Child& c) {
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until `metrics` (a metrics.jsonl) has logged `steps` steps (60 s at most).
inline bool wait_for_steps(const std::string& metrics, size_t steps) {
  for (int i = 0; i < 6000; ++i) {
    if (logged_steps(metrics).size() >= steps) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace rm::test

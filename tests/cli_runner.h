// Runs the real `ringmaster` binary as a child process for end-to-end tests and captures its
// exit code, stdout and stderr. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace rm::test {

// A wrapper for run_cli(): the child's heap and other private writable memory (RLIMIT_DATA) may
// reach at most 512 MiB, so an allocation that a hostile input could make unbounded fails the
// command instead of going unnoticed. Not an address-space limit: a CUDA build maps ~1 GiB of
// cuBLAS code just to start.
inline const char kDataLimit512MiB[] = "prlimit --data=536870912";

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `args` is appended to the binary's path as shell words; `scratch` is a directory for the
// captured streams; `env` is prepended as shell assignments (e.g. "A=1 B=2"); `wrapper` is a
// command that runs the binary (e.g. kDataLimit512MiB).
inline CliResult run_cli(const std::string& args, const std::string& scratch,
                         const std::string& env = "", const std::string& wrapper = "") {
  const std::string out = scratch + "/cli.out", err = scratch + "/cli.err";
  const std::string cmd = env + " " + wrapper + " " + std::string(RINGMASTER_BIN) + " " + args +
                          " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// `r` is a refusal of bad input: exit code 2, `message` in what it printed on stderr.
inline void expect_refused(const CliResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
}

}  // namespace rm::test

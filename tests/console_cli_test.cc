// Rank 0's console through the real binary: on a terminal (a pseudo-terminal from util-linux's
// `script`) a progress line redrawn in place, with ETA and MFU, between the permanent log lines;
// in a log (stdout a file) the permanent lines only. On 1 rank and on 2 (whose stdout is
// mpirun's pipe: `ringmaster run` tells rank 0 the console is a terminal).
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

using test::run_cli;

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: console
run_dir: )" + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt, val_fraction: 0.1}
train: {steps: 30, global_batch: 8, micro_batch: 4, eval_every: 15, eval_batches: 2, log_every: 10}
parallel: {threads_per_rank: 1}
)");
}

// Runs `ringmaster ARGS` on a pseudo-terminal; returns what the terminal received.
std::string on_a_terminal(const std::string& args, const TempDir& dir) {
  const std::string out = dir.file("tty.out");
  const std::string cmd = "timeout -k 5 120 script -qefc \"" + std::string(RINGMASTER_BIN) + " " +
                          args + "\" /dev/null >" + out + " 2>&1 </dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << test::slurp(out);
  return test::slurp(out);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class Console : public testing::TestWithParam<int> {};

TEST_P(Console, OnATerminalAProgressLineIsRedrawnBetweenThePermanentLines) {
  TempDir dir;
  const std::string tty =
      on_a_terminal("run " + job_file(dir) + " --nproc " + std::to_string(GetParam()), dir);
  const std::string erase = "\r\033[K";
  // A progress line after every step, each replacing the last.
  EXPECT_GE(count(tty, erase + "step "), 30) << tty;
  EXPECT_TRUE(std::regex_search(
      tty,
      std::regex(
          R"(step +17/30 +56\.7% \| \d+s elapsed, eta \d+s \| loss \d\.\d{4} \| \d+ tok/s \| MFU \d+%)")))
      << tty;
  // The permanent lines at log_every and evaluations, each alone on its line: the progress
  // line is erased first (step 1's comes before any).
  EXPECT_NE(tty.find("\nstep      1/30 | loss"), std::string::npos) << tty;
  for (const char* line :
       {"step     10/30 | loss", "step     15/30 | loss", "step     30/30 | loss"}) {
    EXPECT_NE(tty.find(erase + line), std::string::npos) << line << "\n" << tty;
  }
  EXPECT_NE(tty.find(erase + "ringmaster: done; weights in"), std::string::npos) << tty;
  // Rank 0's log keeps what stays on the screen: the permanent lines, no redraws, no escapes
  // (before: each log line held every redraw since the last permanent one).
  const std::string log = test::slurp(dir.file("run/logs/rank-0.log"));
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(log.find('\033'), std::string::npos) << log;
  EXPECT_EQ(count(log, "] step "), 5) << "steps 1, 10, 15, 20, 30\n" << log;
  EXPECT_NE(log.find("[rank 0] step     10/30 | loss"), std::string::npos) << log;
}

TEST_P(Console, InALogOnlyThePermanentLines) {
  TempDir dir;
  const auto r =
      run_cli("run " + job_file(dir) + " --nproc " + std::to_string(GetParam()), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("eta "), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "\nstep "), 5) << "steps 1, 10, 15, 20, 30\n" << r.out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Console, testing::Values(1, 2),
                         [](const testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "_ranks";
                         });

}  // namespace
}  // namespace rm

// `ringmaster run --hosts FILE` on bad hostfiles: exit 2, one message naming the file (and
// line), nothing written. The real multi-host run is tests/cluster/cluster_run_test.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

std::string tiny_job(const TempDir& dir) {
  return dir.write("job.yaml", "name: tiny\nrun_dir: " + dir.file("run") + R"(
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 4, global_batch: 8, micro_batch: 2}
)");
}

struct BadHostfile {
  const char* text;
  const char* expected;  // in stderr, after "FILE"
};

TEST(HostsCli, ABadHostfileIsRefusedNamingFileAndLineAndNothingIsWritten) {
  const BadHostfile cases[] = {
      {"node-a slots=2\nnode-b slots=two\n", ":2:1: slots must be a positive number, not 'two'"},
      {"node-a slots=0\n", ":1:1: slots must be a positive number, not '0'"},
      {"node-a cores=2\n", ":1:1: unknown key 'cores'"},
      {"slots=2\n", ":1:1: expected a host name first"},
      {"# nothing\n\n", ": --hosts: the hostfile names no host"},
      {"localhost slots=4 max_slots=2\n", ":1:1: max_slots=2 is less than slots=4"},
      // What Open MPI refuses once the run directory is written (an "internal error", or a
      // name taken for a slot count), refused here first.
      {"localhost slots=1\nnode-b\nlocalhost slots=1\n",
       ":3:1: 'localhost' is named again (first on line 1) with slots="},
      {"localhost\nlocalhost slots=2\n", ":2:1: 'localhost' is named again (first on line 1)"},
      {"localhost slots=2\r\n", ":1:1: a carriage return (a Windows line ending)"},
      {"localhost:2\n",
       ":1:1: 'localhost:2' is not a host name: Open MPI takes letters, digits, "
       "'.' and '-' only (a slot count is written 'host slots=N', not 'host:N')"},
      {"node_a slots=2\n", ":1:1: 'node_a' is not a host name"},
      {"n\xc3\xb6"
       "de slots=2\n",
       ":1:1: 'n\\xc3\\xb6de' is not a host name"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    const std::string hosts = dir.write("hosts", c.text);
    const auto r = run_cli("run " + tiny_job(dir) + " --hosts " + hosts, dir.path());
    EXPECT_EQ(r.exit_code, 2) << c.text << r.err;
    EXPECT_NE(r.err.find(hosts + c.expected), std::string::npos) << c.text << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir.file("run"))) << c.text;
  }
}

// What Open MPI itself reads: a host named again without slots= adds a slot, a slot count
// given on the first line before it is kept, and "slots = 2" is slots=2. `validate` prints the
// ranks it plans for.
TEST(HostsCli, AHostfileIsReadAsOpenMpiReadsIt) {
  TempDir dir;
  const std::string hosts = dir.write("hosts", "localhost slots = 3\nlocalhost\n");
  const auto r = run_cli("validate " + tiny_job(dir) + " --hosts " + hosts, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("4 ranks"), std::string::npos) << r.out << r.err;
  const auto empty = run_cli("validate " + tiny_job(dir) + " --hosts ''", dir.path());
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("--hosts"), std::string::npos) << empty.err;
}

// Slot counts that add up past the most ranks a job may have are refused at the line that goes
// past (before: an int wrapped negative, and `validate` said "dp_ranks must be >= 1", exit 1).
TEST(HostsCli, SlotsPastTheRankLimitAreRefusedAtTheirLine) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2200; ++i) text += "a slots=999999\n";
  const std::string hosts = dir.write("hosts", text);
  const auto r = run_cli("validate " + tiny_job(dir) + " --hosts " + hosts, dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(hosts + ":2:1: more than 1048576 slots in all"), std::string::npos) << r.err;
}

TEST(HostsCli, MoreRanksThanSlotsOrAMissingFileIsRefused) {
  TempDir dir;
  const std::string hosts = dir.write("hosts", "node-a slots=1\nnode-b\n");
  auto r = run_cli("run " + tiny_job(dir) + " --nproc 4 --hosts " + hosts, dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(hosts + ": --nproc 4 but the hostfile has 2 slots"), std::string::npos)
      << r.err;
  r = run_cli("run " + tiny_job(dir) + " --hosts " + dir.file("nope"), dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(dir.file("nope") + ": --hosts: cannot read the hostfile"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ringmaster: 1 error in the hostfile"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("run")));
  // A device or a pipe: refused at once (before: /dev/zero read until memory ran out, a FIFO
  // waited on for ever).
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  for (const std::string& file : {std::string("/dev/zero"), dir.file("fifo")}) {
    r = run_cli("validate " + tiny_job(dir) + " --hosts " + file, dir.path(), "timeout 20");
    EXPECT_EQ(r.exit_code, 2) << file << r.err;
    EXPECT_NE(r.err.find("--hosts: cannot read the hostfile"), std::string::npos) << r.err;
  }
}

// A host mpirun cannot start a process on fails the first launch at once, and the message says
// what mpirun said (here ssh's "Could not resolve hostname"), not only that it failed: a host
// refused at once is told apart from one that never answered ("no answer within 15 s").
TEST(HostsCli, AnUnreachableHostIsNamedWithWhatMpirunSaid) {
  TempDir dir;
  const std::string hosts = dir.write("hosts", "no-such-host.invalid slots=2\n");
  const auto r = run_cli("run " + tiny_job(dir) + " --nproc 2 --hosts " + hosts, dir.path(),
                         "timeout -k 5 60");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string said =
      "host no-such-host.invalid unreachable: mpirun could not start a process on "
      "no-such-host.invalid: mpirun exited ";
  const size_t at = r.err.find(said);
  ASSERT_NE(at, std::string::npos) << r.err;
  // "mpirun exited C: <its first line>", then the hint.
  const std::string rest = r.err.substr(at + said.size());
  const size_t colon = rest.find(": "), hint = rest.find(" (is the host up");
  ASSERT_NE(colon, std::string::npos) << r.err;
  ASSERT_NE(hint, std::string::npos) << r.err;
  EXPECT_GT(hint, colon + 2) << "mpirun's own words are missing: " << r.err;
}

}  // namespace
}  // namespace rm

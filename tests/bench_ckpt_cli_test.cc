// `ringmaster bench ckpt` through the real binary at a tiny size: every row printed with its
// numbers, the directory left as it was found, and bad directories named in one message.
// No timing is asserted: the figures depend on the machine.
#include <gtest/gtest.h>
#include <signal.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <regex>
#include <string>

#include "testing/temp_dir.h"
#include "tests/background_cli.h"
#include "tests/cli_runner.h"
#include "tests/required_parts.h"

namespace rm {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// Each timed row: median, min and max seconds, then GiB/s ("-" under a millisecond).
const char* const kRows[] = {
    "plain write+fsync (baseline)",
    "checkpoint save",
    "sync save() (baseline)",
    "async save() returns",
    "async save() + staging copy",
    "async save() until wait() returns",
    "plain read, cold (baseline)",
    "checkpoint restore, cold",
    "plain read, warm (baseline)",
    "checkpoint restore, warm",
    "plain memcpy into shm (baseline)",
    "memory snapshot save",
    "plain memcpy out of shm (baseline)",
    "memory snapshot restore",
};

void expect_table(const std::string& out) {
  EXPECT_NE(out.find("bench ckpt: "), std::string::npos) << out;
  const std::string num = R"(\s+([0-9]+\.[0-9]+))";
  const std::string rate = R"(\s+([0-9]+\.[0-9]+|-))";  // "-" for a row under 1 ms
  for (const char* row : kRows) {
    const std::string escaped = std::regex_replace(row, std::regex(R"([().+])"), R"(\$&)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("\n  " + escaped + num + num + num + rate)))
        << "no row with numbers for '" << row << "' in\n"
        << out;
    EXPECT_LE(std::stod(m[2]), std::stod(m[1])) << row;  // min <= median <= max
    EXPECT_LE(std::stod(m[1]), std::stod(m[3])) << row;
  }
  // The two ratios with a goal say what the goal is and whether it was met.
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(checkpoint save .* [0-9.]+x speed \(goal >= 0\.80x: (met|NOT met)\))")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(staging copy .* [0-9.]+x time \(worst case; goal <= 0\.10x: (met|NOT met)\))")))
      << out;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  return names;
}

TEST(BenchCkptCli, ExistingDirIsLeftAsItWas) {
  TempDir tmp;
  tmp.write("keep.txt", "not ours");
  const auto r = run_cli("bench ckpt --gib 0.01 --repeats 1 --dir " + tmp.path(), tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  expect_table(r.out);
  // Only the files that were there before (and the runner's captured streams).
  for (const std::string& name : entries(tmp.path())) {
    EXPECT_TRUE(name == "keep.txt" || name == "cli.out" || name == "cli.err") << name;
  }
}

TEST(BenchCkptCli, CreatedDirIsRemovedWithOddShardsAndRepeats) {
  TempDir tmp;
  const std::string dir = tmp.file("a/b");
  const auto r = run_cli("bench ckpt --gib 0.002 --ranks 3 --repeats 2 --dir " + dir, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  expect_table(r.out);
  EXPECT_NE(r.out.find("in 3 shards under " + dir + ", 2 repeats"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp.file("a"))) << "the directories it created must be removed";
  // Nor are its shared-memory segments left (bench/bench_memory_snapshot.cc names them
  // ringmaster-<0xBE4C000000000000 ^ its pid, in hex>-r<rank>). A bench of a test running beside
  // this one may hold some now: only those of processes that have ended count.
  for (const std::string& name : entries("/dev/shm")) {
    if (name.rfind("ringmaster-be4c", 0) != 0 || name.size() < 27) continue;
    const uint64_t key = std::stoull(name.substr(11, 16), nullptr, 16);
    const pid_t pid = static_cast<pid_t>(key ^ 0xBE4C000000000000ull);
    const bool alive = ::kill(pid, 0) == 0 || errno == EPERM;
    EXPECT_TRUE(alive) << "/dev/shm/" << name << " left behind";
  }
}

// Ctrl-C mid-run: the scratch files and the directories it created are removed all the same.
// The signal goes once the benchmark says it has begun (its first line comes after its handlers
// and its directories exist), not after a fixed delay: on a loaded machine the binary's start-up
// alone can outlast one.
TEST(BenchCkptCli, InterruptRemovesTheScratchFiles) {
  TempDir tmp;
  const std::string dir = tmp.file("a/b");
  const test::Child c =
      test::spawn_cli("bench ckpt --gib 0.05 --repeats 100 --dir " + dir, tmp.path());
  ASSERT_TRUE(test::wait_for_text(c.out, "bench ckpt: ")) << test::slurp(c.err);
  ASSERT_TRUE(fs::exists(dir));
  ::kill(c.pid, SIGINT);
  const int code = test::wait_exit(c);
  const std::string err = test::slurp(c.err);
  EXPECT_EQ(code, 1) << test::slurp(c.out) << err;
  EXPECT_NE(err.find("stopped by signal 2; scratch files removed"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tmp.file("a"))) << "the directories it created must be removed";
}

TEST(BenchCkptCli, DirUnderARegularFileIsNamed) {
  TempDir tmp;
  const std::string file = tmp.write("file", "x");
  const std::string dir = file + "/sub";
  const auto r = run_cli("bench ckpt --gib 0.01 --repeats 1 --dir " + dir, tmp.path());
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find(dir), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("checkpoint save"), std::string::npos) << "no table after an error";
  EXPECT_TRUE(fs::is_regular_file(file));
}

TEST(BenchCkptCli, TooLittleFreeSpaceIsNamedBeforeWriting) {
  TempDir tmp;
  struct statvfs st;
  ASSERT_EQ(::statvfs(tmp.path().c_str(), &st), 0);
  const double free_gib = static_cast<double>(st.f_bavail) * st.f_frsize / (1 << 30);
  // Twice what is free (at least 256 GiB): it runs on any filesystem, however large (CI fails on
  // any skip but the GPU tests). The space is checked before anything is allocated or written.
  const long gib = std::max(256L, static_cast<long>(2 * free_gib));
  const std::string dir = tmp.file("big");
  const auto r =
      run_cli("bench ckpt --gib " + std::to_string(gib) + " --repeats 1 --dir " + dir, tmp.path());
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find(dir + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GiB free"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir));
}

// `bench ckpt` under a /dev/shm of its own of `mib` MiB (a private mount namespace, as Docker's
// 64 MiB default): the wrapper run_cli puts before the binary.
std::string with_shm_of(int mib) {
  return "unshare -m --propagation private sh -c 'mount -t tmpfs -o size=" + std::to_string(mib) +
         "m tmpfs /dev/shm && exec \"$@\"' sh";
}

// 0.01 GiB in 2 shards takes 2 x 2 slots of 5.4 MB and a 5.4 MB plain mapping in /dev/shm. In
// 48 MiB it runs (it reserved three times each shard, and a sparse plain mapping ended in SIGBUS
// with the segments left behind); in 8 MiB it is refused before anything is written.
TEST(BenchCkptCli, ASmallDevShmRunsOrIsNamedBeforeWriting) {
  TempDir tmp;
  if (std::system("unshare -m --propagation private true 2>/dev/null") != 0) {
    RM_SKIP_UNLESS_REQUIRED("netns", "no mount namespaces here (unshare -m; needs root)");
  }
  const std::string dir = tmp.file("d");
  const std::string args = "bench ckpt --gib 0.01 --repeats 1 --ranks 2 --dir " + dir;
  const auto fits = run_cli(args, tmp.path(), "", with_shm_of(48));
  EXPECT_EQ(fits.exit_code, 0) << fits.out << fits.err;
  expect_table(fits.out);
  EXPECT_FALSE(fs::exists(dir));
  const auto small = run_cli(args, tmp.path(), "", with_shm_of(8));
  EXPECT_NE(small.exit_code, 0) << small.out;
  EXPECT_NE(small.err.find("/dev/shm: "), std::string::npos) << small.err;
  EXPECT_NE(small.err.find("the in-memory rows need"), std::string::npos) << small.err;
  EXPECT_EQ(small.out.find("checkpoint save"), std::string::npos) << "no table after an error";
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace rm

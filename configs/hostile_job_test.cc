// Hostile job files at the library level: read_job_file() on what is no regular file, and
// load_job*() on texts and values built to hang, exhaust or crash a parser. Each is refused with
// exactly one error, whatever else the text holds. (tests/hostile_files_cli_test.cc runs the
// same kinds of file through the binary, with time and memory bounds.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "configs/job_file.h"
#include "configs/job_loader.h"
#include "configs/test_util.h"
#include "configs/yaml_guard.h"

namespace rm {
namespace {

using testing::kMinimalJob;
using testing::one_error;

std::string read_error(const std::string& path) {
  std::string text;
  return read_job_file(path, &text);
}

// A path in the build directory for a file this test makes, removed first.
std::string scratch(const std::string& name) {
  const std::string path = std::string(RM_CONFIGS_BUILD_DIR) + "/hostile_job_test." + name;
  std::filesystem::remove(path);
  return path;
}

TEST(HostileJob, OnlyRegularFilesOfAtMost1MiBAreRead) {
  EXPECT_EQ(read_error(scratch("none.yaml")), "cannot read job file: No such file or directory");
  EXPECT_EQ(read_error(RM_CONFIGS_BUILD_DIR), "cannot read job file: a directory, not a regular file");
  EXPECT_EQ(read_error("/dev/zero"),
            "cannot read job file: a character device, not a regular file");
  const std::string fifo = scratch("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_error(fifo), "cannot read job file: a FIFO, not a regular file");  // no wait

  const std::string big = scratch("big.yaml");
  std::ofstream(big) << kMinimalJob;
  std::filesystem::resize_file(big, kMaxJobBytes + 1);  // sparse: refused by its size alone
  EXPECT_EQ(read_error(big),
            "too large for a job file: 1048577 bytes, the limit is 1048576 (1 MiB)");
  std::filesystem::resize_file(big, kMaxJobBytes);
  std::string text;
  EXPECT_EQ(read_job_file(big, &text), "");
  EXPECT_EQ(text.size(), kMaxJobBytes);
  EXPECT_EQ(text.substr(0, sizeof kMinimalJob - 1), kMinimalJob);
  std::filesystem::remove(fifo);
  std::filesystem::remove(big);
}

// A refused text yields its one error and nothing else: no "data.train: no training data".
TEST(HostileJob, ARefusedTextIsOneError) {
  EXPECT_EQ(one_error(std::string(kMaxJobBytes + 1, '#')),
            "job.yaml: too large for a job file: 1048577 bytes, the limit is 1048576 (1 MiB)");
  EXPECT_EQ(one_error(std::string("name: \0", 7)),
            "job.yaml:1:7: not a text file: a NUL byte (a binary file, or UTF-16 text?)");
  EXPECT_EQ(one_error("x: " + std::string(1000, '[')),
            "job.yaml:1:67: nested deeper than 64 levels");
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    bomb += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 8; ++k) bomb += ", " + prev;
    bomb += "]\n";
  }
  EXPECT_EQ(one_error(bomb),
            "job.yaml: aliases expand to more than 200000 nodes (anchors that reference anchors: "
            "a \"billion laughs\" file?)");
}

TEST(HostileJob, NumbersOutOfRange) {
  const std::string job = kMinimalJob;
  EXPECT_EQ(one_error(job + "train:\n  steps: 1e400\n"),
            "job.yaml:4:10: train.steps: expected an integer, got '1e400'");
  EXPECT_EQ(one_error(job + "train:\n  steps: -99999999999999999999999\n"),
            "job.yaml:4:10: train.steps: must be >= -9223372036854775808, got "
            "-99999999999999999999999");
  EXPECT_EQ(one_error(job + "optimizer:\n  lr: 1e400\n"),
            "job.yaml:4:7: optimizer.lr: must be a finite number, got '1e400', which is beyond "
            "the largest double (about 1.8e308)");
  for (const char* v : {"nan", "NaN", ".nan", ".NaN", "inf", "-inf", ".inf", "-.Inf", "+.INF"}) {
    EXPECT_EQ(one_error(job + "optimizer:\n  lr: " + v + "\n"),
              std::string("job.yaml:4:7: optimizer.lr: must be a finite number, got '") + v + "'");
  }
  // libstdc++'s std::regex recursed once per character here: a long value crashed the loader.
  EXPECT_EQ(one_error(job + "model:\n  width: " + std::string(300000, '7') + "\n"),
            "job.yaml:4:10: model.width: must be <= 2147483647, got " + std::string(60, '7') +
                "... (300000 bytes)");
}

TEST(HostileJob, LongStringsKeysAndNamesAreCutShortInMessages) {
  const std::string job = kMinimalJob;
  const std::string long_text(100000, 'x');
  const std::string shown = "'" + std::string(60, 'x') + "...' (100000 bytes)";
  EXPECT_EQ(one_error(job + "name: " + long_text + "\n"),
            "job.yaml:3:7: name: longer than 4096 bytes, got " + shown);
  EXPECT_EQ(one_error("data:\n  train: [a.bin, " + long_text + "]\n"),
            "job.yaml:2:18: data.train[1]: longer than 4096 bytes, got " + shown);
  EXPECT_EQ(one_error(job + "? " + long_text + "\n: 1\n"), "job.yaml:3:3: unknown key " + shown);
  EXPECT_EQ(one_error(job + "cluster:\n  env:\n    ? " + long_text + "\n    : 1\n"),
            "job.yaml:5:7: cluster.env: longer than 4096 bytes, got " + shown);
  EXPECT_EQ(one_error(job + "cluster:\n  env:\n    ? " + std::string(1000, '-') + "\n    : 1\n"),
            "job.yaml:5:7: cluster.env: '" + std::string(60, '-') +
                "...' (1000 bytes) is not a valid name (a letter or '_', then letters, digits, "
                "'_')");
  // A name fits in one directory entry (NAME_MAX), so `runs/<name>` also stays under 4096
  // bytes and the resolved job loads back (job_fuzz once found a 4092-byte name that did not).
  EXPECT_EQ(one_error(job + "name: " + std::string(4092, 'x') + "\n"),
            "job.yaml:3:7: name: must be at most 255 bytes (it names a directory), got 4092 bytes");
  EXPECT_EQ(one_error(job + "name: " + std::string(256, 'x') + "\n"),
            "job.yaml:3:7: name: must be at most 255 bytes (it names a directory), got 256 bytes");
  // Escapes that yaml-cpp decodes to bytes that are not UTF-8 are refused where they are, not in
  // the resolved job that `run` writes (job_fuzz found "\N" in a cluster.env value).
  EXPECT_EQ(one_error(job + "cluster:\n  env:\n    A: \"x\\Ny\"\n"),
            "job.yaml:5:8: cluster.env.A: not UTF-8 text: invalid byte 0x85 (a job file is "
            "UTF-8), once its escapes are decoded (yaml-cpp decodes \\N and \\_ to single "
            "bytes: write \\u0085 or \\u00A0)");
  EXPECT_EQ(one_error(job + "name: \"a\\x01\"\n"),
            "job.yaml:3:7: name: not a text file: control character 0x01 (a binary file?), once "
            "its escapes are decoded");
  // A multi-line value stays on one line of the message.
  EXPECT_EQ(one_error(job + "model:\n  type: |\n    g\n    p\n"),
            "job.yaml:4:9: model.type: must be one of gpt|mlp, got 'g\\np\\n'");
}

}  // namespace
}  // namespace rm

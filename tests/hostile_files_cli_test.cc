// Hostile job files through the real binary: whatever the file is (a directory, /dev/zero, a
// FIFO, huge, binary, deeply nested, an alias bomb, numbers out of range), `ringmaster validate`
// exits 2 quickly, in bounded memory, with one message naming the file and what is wrong.
//
// Every case runs under a 512 MiB data limit (cli_runner.h) and must finish within
// kBound: a bound that a hang or an unbounded read fails, not a benchmark (they take ~10 ms, up to
// ~0.3 s for a megabyte of YAML; a loaded machine can multiply that).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"

namespace rm {
namespace {

using test::run_cli;

constexpr double kBound = 10.0;  // seconds
const std::string kTrain = "data:\n  train: data/tinyshakespeare.txt\n";

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string mkfifo_in(const TempDir& dir) {
  const std::string path = dir.file("job.fifo");
  if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
  return path;
}

// "billion laughs": nine levels of nine aliases each, 9^9 leaves once expanded.
std::string alias_bomb() {
  std::string text = kTrain + "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 9; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 9; ++k) text += ", " + prev;
    text += "]\n";
  }
  return text;
}

std::string deep_block_maps(int levels) {
  std::string text = kTrain + "x:\n";
  for (int i = 1; i <= levels; ++i) text += std::string(i, ' ') + "a:\n";
  return text;
}

struct HostileCase {
  const char* name;
  // Returns the job file's path; may write it into the directory.
  std::function<std::string(const TempDir&)> make;
  std::string reason;  // what the message must say after "PATH"
};

std::function<std::string(const TempDir&)> text_file(const std::string& text) {
  return [text](const TempDir& dir) { return dir.write("job.yaml", text); };
}

std::vector<HostileCase> cases() {
  return {
      {"Directory", [](const TempDir& dir) { return dir.path(); },
       ": cannot read job file: a directory, not a regular file"},
      {"DevZero", [](const TempDir&) { return std::string("/dev/zero"); },
       ": cannot read job file: a character device, not a regular file"},
      {"Fifo", mkfifo_in, ": cannot read job file: a FIFO, not a regular file"},
      {"Over1MiB",
       [](const TempDir& dir) {
         const std::string path = dir.write("job.yaml", kTrain);
         std::filesystem::resize_file(path, uint64_t{8} << 30);  // sparse: 8 GiB claimed
         return path;
       },
       ": too large for a job file: 8589934592 bytes, the limit is 1048576 (1 MiB)"},
      {"Binary", text_file(std::string("\177ELF\2\1\1\0\0\0", 10) + repeat("\220", 64)),
       ":1:1: not a text file: control character 0x7F (a binary file?)"},
      {"NulByte", text_file(kTrain + std::string("name: a\0b\n", 10)),
       ":3:8: not a text file: a NUL byte (a binary file, or UTF-16 text?)"},
      {"InvalidUtf8", text_file(kTrain + "name: caf\xC3\x28\n"),
       ":3:10: not UTF-8 text: invalid byte 0xC3 (a job file is UTF-8)"},
      {"Utf16", text_file(std::string("\377\376d\0a\0t\0a\0", 10)),
       ":1:1: not UTF-8 text: a UTF-16 byte order mark (save the file as UTF-8)"},
      {"DeepSequences", text_file(kTrain + "x: " + repeat("[", 10000) + repeat("]", 10000)),
       ":3:67: nested deeper than 64 levels"},
      {"DeepFlowMaps", text_file(kTrain + "x: " + repeat("{a: ", 10000) + "1" + repeat("}", 10000)),
       ":3:256: nested deeper than 64 levels"},
      {"DeepBlockMaps", text_file(deep_block_maps(1000)), ":67:65: nested deeper than 64 levels"},
      {"AliasBomb", text_file(alias_bomb()),
       ": aliases expand to more than 200000 nodes (anchors that reference anchors: a "
       "\"billion laughs\" file?)"},
      {"ManyAliases", text_file(kTrain + "a: &a 1\nb: [*a" + repeat(", *a", 999) + "]\n"),
       ":4:1029: more than 256 aliases (*name); a job file needs few or none"},
      {"ManyEntries", text_file(kTrain + "x: {a" + repeat(",a", 400000) + "}\n"),
       ":3:39998: more than 20000 YAML entries"},
      {"IntegerAsHugeFloat", text_file(kTrain + "train:\n  steps: 1e400\n"),
       ":4:10: train.steps: expected an integer, got '1e400'"},
      {"IntegerTooLarge", text_file(kTrain + "train:\n  steps: 99999999999999999999999\n"),
       ":4:10: train.steps: must be <= 9223372036854775807, got 99999999999999999999999"},
      {"IntegerOfHalfAMillionDigits",
       text_file(kTrain + "train:\n  steps: " + std::string(500000, '9') + "\n"),
       ":4:10: train.steps: must be <= 9223372036854775807, got " + std::string(60, '9') +
           "... (500000 bytes)"},
      {"FloatBeyondDouble", text_file(kTrain + "optimizer:\n  lr: -1e309\n"),
       ":4:7: optimizer.lr: must be a finite number, got '-1e309', which is beyond the largest "
       "double (about 1.8e308)"},
      {"FloatNan", text_file(kTrain + "optimizer:\n  lr: nan\n"),
       ":4:7: optimizer.lr: must be a finite number, got 'nan'"},
      {"FloatInf", text_file(kTrain + "optimizer:\n  lr: .inf\n"),
       ":4:7: optimizer.lr: must be a finite number, got '.inf'"},
      {"HugeString", text_file("name: " + std::string(900000, 'a') + "\n" + kTrain),
       ":1:7: name: longer than 4096 bytes, got '" + std::string(60, 'a') + "...' (900000 bytes)"},
  };
}

class HostileJobFile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileJobFile, ValidateExits2QuicklyWithOneMessage) {
  TempDir dir;
  const HostileCase& c = GetParam();
  const std::string path = c.make(dir);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_cli("validate " + path, dir.path(), "", test::kDataLimit512MiB);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(seconds, kBound);
  // One error line naming the file and what is wrong, then the summary.
  EXPECT_EQ(r.err.rfind(path + c.reason, 0), 0u) << r.err;
  EXPECT_NE(r.err.find("\nringmaster: 1 error in the job\n"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 400u) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileJobFile, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// `run` reads the job the same way; a FIFO must not make it wait for a writer.
TEST(HostileJobFileRun, RunRefusesAFifoWithoutWaiting) {
  TempDir dir;
  const std::string path = mkfifo_in(dir);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_cli("run " + path, dir.path(), "", test::kDataLimit512MiB);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kBound);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind(path + ": cannot read job file: a FIFO, not a regular file", 0), 0u)
      << r.err;
}

// Data files and checkpoint manifests that are FIFOs are refused too, not waited on.
TEST(HostileJobFileRun, DataAndManifestFifosAreRefused) {
  TempDir dir;
  const std::string fifo = mkfifo_in(dir);
  const std::string job = dir.write("job.yaml", "run_dir: " + dir.file("run") +
                                                    "\nmodel: {type: gpt, seq_len: 32, layers: 1, "
                                                    "heads: 2, width: 32}\ndata: {train: " +
                                                    fifo + "}\n");
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_cli("run " + job, dir.path(), "", test::kDataLimit512MiB);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kBound);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(fifo + ": a FIFO, not a regular file"), std::string::npos) << r.err;

  const std::string ckpt = dir.file("step_00000001");
  std::filesystem::create_directory(ckpt);
  ASSERT_EQ(::mkfifo((ckpt + "/manifest.json").c_str(), 0600), 0);
  t0 = std::chrono::steady_clock::now();
  r = run_cli("ckpt verify " + ckpt, dir.path(), "", test::kDataLimit512MiB);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kBound);
  EXPECT_EQ(r.exit_code, 1) << r.err;  // `ckpt verify`: 1 = the checkpoint does not verify
  EXPECT_NE(r.err.find(ckpt + "/manifest.json: a FIFO, not a regular file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rm

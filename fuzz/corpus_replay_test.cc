// Replays a fuzz target's seed corpus through its entry point in the ordinary build, so every
// test run exercises the harness and the inputs that once were findings (fuzz/fuzz_target.h
// states what each file name expects). cmake/fuzz.cmake compiles this file once per target,
// with RM_FUZZ_NAME, RM_FUZZ_CORPUS_DIR and RM_FUZZ_MAX_LEN (the fuzzer's -max_len).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"

namespace rm::fuzz {
namespace {

namespace fs = std::filesystem;

struct Seed {
  std::string name;
  std::string bytes;
};

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Every file of the corpus but its README, by name.
const std::vector<Seed>& corpus() {
  static const std::vector<Seed> seeds = [] {
    std::vector<Seed> out;
    for (const fs::directory_entry& e : fs::directory_iterator(RM_FUZZ_CORPUS_DIR)) {
      const std::string name = e.path().filename().string();
      if (name == "README.md" || !e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      out.push_back({name, bytes.str()});
    }
    std::sort(out.begin(), out.end(), [](const Seed& a, const Seed& b) { return a.name < b.name; });
    return out;
  }();
  return seeds;
}

// The outcome, or a test failure naming the seed and the finding.
bool run(const Seed& s, FuzzOutcome* out) {
  try {
    *out = run_fuzz_input(s.bytes, s.name);
    return true;
  } catch (const std::exception& e) {
    ADD_FAILURE() << RM_FUZZ_NAME << " seed " << s.name << ": a finding: " << e.what();
  } catch (...) {
    ADD_FAILURE() << RM_FUZZ_NAME << " seed " << s.name << ": threw a non-exception";
  }
  return false;
}

// libFuzzer reads at most -max_len bytes of a seed: a longer one would be fuzzed cut short.
TEST(FuzzCorpus, HasValidAndBadSeedsWithinMaxLen) {
  ASSERT_TRUE(fs::is_regular_file(fs::path(RM_FUZZ_CORPUS_DIR) / "README.md"))
      << RM_FUZZ_CORPUS_DIR << " has no README.md saying what its seeds are";
  int valid = 0, bad = 0;
  for (const Seed& s : corpus()) {
    valid += starts_with(s.name, "valid_");
    bad += starts_with(s.name, "bad_");
    EXPECT_LE(s.bytes.size(), static_cast<size_t>(RM_FUZZ_MAX_LEN))
        << s.name << " is longer than the fuzzer's -max_len (cmake/fuzz.cmake MAX_LEN)";
  }
  EXPECT_GT(valid, 0) << "no valid_* seed in " << RM_FUZZ_CORPUS_DIR;
  EXPECT_GT(bad, 0) << "no bad_* seed in " << RM_FUZZ_CORPUS_DIR;
}

TEST(FuzzCorpus, ValidSeedsAreAccepted) {
  for (const Seed& s : corpus()) {
    FuzzOutcome o;
    if (!starts_with(s.name, "valid_") || !run(s, &o)) continue;
    EXPECT_TRUE(o.accepted) << s.name << " should be accepted, was rejected: " << o.error;
  }
}

// Rejected with the documented error type (else run() fails) and a message naming the input.
TEST(FuzzCorpus, BadSeedsAreRejected) {
  for (const Seed& s : corpus()) {
    FuzzOutcome o;
    if (!starts_with(s.name, "bad_") || !run(s, &o)) continue;
    EXPECT_FALSE(o.accepted) << s.name << " should be rejected, was accepted";
    if (o.accepted) continue;
    EXPECT_FALSE(o.prefix.empty()) << s.name;
    EXPECT_EQ(o.error.rfind(o.prefix, 0), 0u) << s.name << ": " << o.error;
    EXPECT_NE(o.error.find(o.prefix == "--set " ? "--set" : s.name), std::string::npos)
        << s.name << ": the message does not name the input: " << o.error;
  }
}

// Every seed, through the libFuzzer hook itself as well: nothing may escape either.
TEST(FuzzCorpus, NoSeedIsAFinding) {
  int accepted = 0, rejected = 0;
  for (const Seed& s : corpus()) {
    FuzzOutcome o;
    if (run(s, &o)) ++(o.accepted ? accepted : rejected);
    const auto* data = reinterpret_cast<const uint8_t*>(s.bytes.data());
    EXPECT_NO_THROW(LLVMFuzzerTestOneInput(data, s.bytes.size())) << s.name;
  }
  std::printf("[%s corpus] %zu seeds: %d accepted, %d rejected\n", RM_FUZZ_NAME, corpus().size(),
              accepted, rejected);
}

}  // namespace
}  // namespace rm::fuzz

// Fuzz target: loading a job file with --set overrides, as `ringmaster run/validate/submit` do.
//
// Input: the job file's text, then zero or more overrides, each introduced by the separator
// "\n--set " (so a seed reads like the command line: the job, then lines "--set key=value").
// An override runs to the next separator or the end of the input, verbatim, line breaks and a
// final newline included. The text goes to load_job_from_string(), the loader load_job() (the
// CLI's) runs once it has read the file: job_file.h's reading is not fuzzed, all else is.
//
// Contract (fuzz/fuzz_target.h): accepted = the job loads for one data-parallel rank; rejected =
// JobConfigError, whose every error names its source -- the job file (`name`) or "--set" -- on
// one line of its own (what() lists the errors one per line), with a position, if any, inside
// the text. Each input is also loaded the way `submit` loads it (ranks = cluster.nodes x
// tasks_per_node), under the same contract. A job that loads is written back with to_yaml()
// and loaded again: it must load, and give the same YAML (job_loader.h promises the round trip).
// Anything else is a finding: another exception (std::invalid_argument, YAML::Exception, ...),
// a round trip that fails or differs (std::logic_error), a crash, a sanitizer report, a hang.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz/corpus_replay_test.cc
// replays fuzz/corpora/job/ through it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "configs/config_error.h"
#include "configs/job_loader.h"
#include "fuzz/fuzz_target.h"

namespace rm {
namespace {

constexpr std::string_view kSeparator = "\n--set ";

struct FuzzJob {
  std::string text;
  std::vector<std::string> overrides;
};

FuzzJob split(std::string_view input) {
  FuzzJob job;
  size_t next = input.find(kSeparator);
  job.text = std::string(input.substr(0, next));
  while (next != std::string_view::npos) {
    const size_t at = next + kSeparator.size();
    next = input.find(kSeparator, at);
    job.overrides.emplace_back(input.substr(at, next == std::string_view::npos ? next : next - at));
  }
  return job;
}

// Checks a rejection against the contract above and returns its outcome.
fuzz::FuzzOutcome rejection(const JobConfigError& e, const std::string& name,
                            const std::string& text) {
  fuzz::require(!e.errors.empty(), "JobConfigError without errors: " + std::string(e.what()));
  const int lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (const ConfigError& c : e.errors) {
    const std::string line = c.str();
    fuzz::require(c.file == name || c.file == kOverrideSource,
                  "an error names neither the job file nor --set: " + line);
    fuzz::require(line.find('\n') == std::string::npos && line.find('\r') == std::string::npos,
                  "an error spans several lines: " + line);
    fuzz::require(c.line >= 0 && c.line <= lines && (c.line == 0 || c.col >= 1),
                  "an error's position is outside the job file (" + std::to_string(lines) +
                      " lines): " + line);
    fuzz::require(c.file == name || c.line == 0, "an override's error has a position: " + line);
  }
  const bool from_file = e.errors.front().file == name;
  return fuzz::rejected(e.what(), from_file ? name + ":" : std::string(kOverrideSource) + " ");
}

// to_yaml(load(to_yaml(cfg))) == to_yaml(cfg), for the ranks cfg was loaded for.
void check_round_trip(const JobConfig& cfg, const std::string& name, int dp_ranks) {
  const std::string once = to_yaml(cfg);
  std::optional<JobConfig> back;
  try {
    back = load_job_from_string(once, name + ".resolved", {}, dp_ranks);
  } catch (const JobConfigError& e) {
    fuzz::require(false, "the resolved job does not load back: " + std::string(e.what()) +
                             "\n--- resolved job ---\n" + once);
  }
  const std::string twice = to_yaml(*back);
  fuzz::require(twice == once, "the resolved job loads back differently:\n--- once ---\n" + once +
                                   "--- twice ---\n" + twice);
}

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  const FuzzJob job = split(input);
  // `submit`: the rank count comes from the job's cluster section. Its outcome may differ from
  // the one-rank load (batch arithmetic), but not its contract.
  try {
    check_round_trip(load_job_from_string(job.text, name, job.overrides, kRanksFromCluster), name,
                     kRanksFromCluster);
  } catch (const JobConfigError& e) {
    rejection(e, name, job.text);
  }
  // `run` and `validate` on one rank: the outcome that counts.
  try {
    check_round_trip(load_job_from_string(job.text, name, job.overrides, 1), name, 1);
  } catch (const JobConfigError& e) {
    return rejection(e, name, job.text);
  }
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}

// The contract every fuzz target of Ringmaster follows (cmake/fuzz.cmake builds them).
//
// A target is one entry-point file next to the code it fuzzes (configs/job_fuzz.cc, ...). It
// defines run_fuzz_input() below and the libFuzzer hook LLVMFuzzerTestOneInput, which calls it
// with the name "input". run_fuzz_input runs one input through the code under test and returns
// how that ended:
//   accepted  the input parsed, and what the harness then did with it (a round trip, reading
//             every tensor or token it names) agreed with the input;
//   rejected  the code threw the error type its header documents for bad input
//             (JobConfigError, CheckpointError, DataError), with a message that names the input:
//             `name`, the file the harness wrote it to, or "--set" for an override.
// Anything else is a finding and escapes as an exception, a crash or a sanitizer report: another
// exception type, a rejection whose message does not name its input, a parsed input the code
// then mishandles (std::logic_error from require() below), a hang, unbounded memory.
//
// In the fuzzer an escaping exception ends in std::terminate: a crash libFuzzer saves. In the
// ordinary build fuzz/corpus_replay_test.cc calls run_fuzz_input for every file of the target's
// seed corpus, whose names say what is expected:
//   valid_*       accepted
//   bad_*         rejected
//   regression_*  no finding: an input that once was one (scripts/fuzz.sh says how to add one)
//   other names   no finding (e.g. mut_*, random mutations of the valid seeds)
// Entry points are not thread-safe: they share one scratch directory (fuzz/scratch_dir.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rm::fuzz {

struct FuzzOutcome {
  bool accepted = false;
  std::string error;   // a rejection's what()
  std::string prefix;  // what the rejection's message was checked to start with
};

// Defined once per target, by its entry-point file.
FuzzOutcome run_fuzz_input(std::string_view input, const std::string& name);

// A finding: throws std::logic_error("fuzz finding: " + what) unless `ok`.
inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("fuzz finding: " + what);
}

inline FuzzOutcome accepted() {
  return FuzzOutcome{true, "", ""};
}

// The rejected outcome for an error whose message must start with `prefix` (a path and ": ",
// "--set ", ...): a message that does not is a finding, since users act on the file it names.
inline FuzzOutcome rejected(const std::string& message, const std::string& prefix) {
  require(message.compare(0, prefix.size(), prefix) == 0,
          "the rejection does not start with '" + prefix + "': " + message);
  return FuzzOutcome{false, message, prefix};
}

}  // namespace rm::fuzz

// libFuzzer's entry point; each target defines it as a call of run_fuzz_input(input, "input").
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Checks of command-line values, as CLI11 validators: a bad value is refused while the command
// line is parsed, before anything runs, with one message that names the option and says what is
// wrong ("--max-tokens: 'abc' is not a whole number"), and exit 2 (main.cc). CLI11's own checks
// answered "abc" with "Value abc not in range 0 to 1.79...e308" (309 digits), wrapped "-1" into
// a uint64 seed, and let "" through as a path.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace rm::cli {

// A path that is not empty (a run directory, a data file).
CLI::Validator non_empty();

// A path that is not empty, one line, and UTF-8 text with no control characters but tab and
// carriage return: one that
// Ringmaster records in its JSON files (--from, in events.jsonl and the checkpoints' lines),
// which hold UTF-8 only (a Latin-1 name ended the run at its first event).
CLI::Validator recorded_path();

// -o FILE, which is written to a new file and renamed into place. Refuses an empty path, a
// directory, anything but a regular file at the path or behind its symbolic links (/dev/stdout:
// renaming over it would replace the link), and a path whose directory does not exist. The value
// becomes the file written: a symbolic link is followed to the file it names, so that the link
// stays a link. Give it with ->transform(), which keeps what it changes (->check() does not).
CLI::Validator output_file();

// A whole number written in decimal digits, in [lo, hi]: "1e3", "-1", "0x10" and anything beyond
// hi are refused (hi: the largest the option's type holds, or less). Give it with ->transform():
// it rewrites the value without leading zeros, which CLI11 would read as octal ("010" = 8).
CLI::Validator whole_number(uint64_t lo = 0, uint64_t hi = std::numeric_limits<int>::max());

// A real number (not NaN) at least lo, and at most hi where one is given.
CLI::Validator real_at_least(double lo, double hi = std::numeric_limits<double>::infinity());

// A real number in (0, 1]: a share that must leave something (top-p).
CLI::Validator share();

// -o `output` of a command that reads `input`: throws InputError (exit 2) naming `option` when
// writing it would overwrite what is read -- the input file itself (`tokenize` replaced its text
// by the shard), or a file of the run or checkpoint directory `input`: any file of a checkpoint,
// and of a run its own (weights.bin, config.yaml, metrics.jsonl, events.jsonl, line.json, the
// locks .lock and .ranks.lock, and everything
// under checkpoints/, logs/, trace/ and slurm/; `ckpt export -o RUN_DIR/weights.bin` replaced
// the run's weights). A new file beside them (RUN_DIR/model.safetensors) is fine.
void refuse_overwriting_input(const std::string& option, const std::string& output,
                              const std::string& input);

}  // namespace rm::cli

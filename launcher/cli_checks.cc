#include "launcher/cli_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "base/input_error.h"
#include "configs/yaml_guard.h"

namespace rm::cli {

namespace fs = std::filesystem;

namespace {

std::string in_quotes(const std::string& s) {
  return "'" + s + "'";
}

// `path` with its symbolic links followed to the file they name (which may not exist yet);
// empty when the chain loops or a link cannot be read.
fs::path through_links(fs::path path) {
  std::error_code ec;
  for (int hops = 0; hops < 40; ++hops) {
    if (!fs::is_symlink(fs::symlink_status(path, ec))) return path;
    const fs::path target = fs::read_symlink(path, ec);
    if (ec) return {};
    // Relative to the link's directory as the kernel resolves it: its own links followed first,
    // so that a ".." in the target leaves the directory the link really is in.
    const fs::path dir =
        fs::weakly_canonical(path.parent_path().empty() ? fs::path(".") : path.parent_path(), ec);
    if (ec) return {};
    path = (target.is_absolute() ? target : dir / target).lexically_normal();
  }
  return {};
}

}  // namespace

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& value) { return value.empty() ? std::string("empty: give a path") : ""; },
      "PATH");
}

CLI::Validator recorded_path() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty()) return "empty: give a path";
        const auto problem = check_text_encoding(value);
        if (!problem && value.find('\n') == std::string::npos) return "";
        return "the path is " +
               (problem ? problem->message.substr(0, problem->message.find(" (")) +
                              " at its character " + std::to_string(problem->col)
                        : std::string("not one line")) +
               ": ringmaster records it in JSON files, which hold UTF-8 text";
      },
      "PATH");
}

CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty()) return "empty: give a file path";
        std::error_code ec;
        const fs::file_status st = fs::status(value, ec);  // through the links
        if (fs::is_directory(st)) return in_quotes(value) + " is a directory: give a file path";
        if (fs::exists(st) && !fs::is_regular_file(st)) {
          return in_quotes(value) +
                 " is not a regular file (a device, pipe or socket): the output is written to a "
                 "new file and renamed into place; give a file path";
        }
        const fs::path file = through_links(value);
        if (file.empty()) return in_quotes(value) + ": its symbolic links loop or cannot be read";
        const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
        if (!fs::is_directory(dir, ec)) {
          return in_quotes(value) + ": no such directory " + in_quotes(dir.string());
        }
        value = file.string();
        return "";
      },
      "FILE");
}

CLI::Validator whole_number(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
          return in_quotes(value) + " is not a whole number (decimal digits, at least " +
                 std::to_string(lo) + ")";
        }
        errno = 0;
        const unsigned long long n = std::strtoull(value.c_str(), nullptr, 10);
        if (errno == ERANGE || n > hi) {
          return in_quotes(value) + " is above the largest allowed, " + std::to_string(hi);
        }
        if (n < lo) {
          return in_quotes(value) + " is below the smallest allowed, " + std::to_string(lo);
        }
        value = std::to_string(n);  // CLI11 would read "010" as octal
        return "";
      },
      "UINT");
}

CLI::Validator real_at_least(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || std::isnan(x)) {
          return in_quotes(value) + " is not a number";
        }
        if (!(x >= lo && x <= hi) || std::isinf(x)) {
          return in_quotes(value) + " is out of range: give a finite number " +
                 (std::isinf(hi)
                      ? "of at least " + CLI::detail::to_string(lo)
                      : "from " + CLI::detail::to_string(lo) + " to " + CLI::detail::to_string(hi));
        }
        return "";
      },
      "FLOAT");
}

CLI::Validator share() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || std::isnan(x)) {
          return in_quotes(value) + " is not a number";
        }
        if (!(x > 0.0 && x <= 1.0)) return in_quotes(value) + " is not in (0, 1]";
        return "";
      },
      "FLOAT in (0, 1]");
}

void refuse_overwriting_input(const std::string& option, const std::string& output,
                              const std::string& input) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(fs::absolute(output), ec);
  if (ec) return;  // written through its own checks (output_file)
  const fs::path in = fs::weakly_canonical(fs::absolute(input), ec);
  if (ec) return;
  const auto refuse = [&](const std::string& what) {
    throw InputError(option + " " + output + ": " + what +
                     ", which this command reads: it would be overwritten; write elsewhere");
  };
  if (!fs::is_directory(in, ec)) {
    if (out == in || (fs::exists(out, ec) && fs::equivalent(out, in, ec))) refuse("the input file");
    return;
  }
  const fs::path rel = out.lexically_relative(in);
  if (rel.empty() || *rel.begin() == ".." || rel == ".") return;
  if (fs::exists(in / "manifest.json", ec)) refuse("a file of the checkpoint " + input);
  const std::string first = rel.begin()->string();
  for (const char* own : {"checkpoints", "logs", "trace", "slurm"}) {
    if (first == own && std::next(rel.begin()) != rel.end()) refuse("a file of the run " + input);
  }
  // The locks too: a file written over one is a new inode, and the run holding the old one would
  // no longer keep another out (base/run_lock.h).
  for (const char* own : {"weights.bin", "config.yaml", "metrics.jsonl", "events.jsonl",
                          "line.json", ".lock", ".ranks.lock"}) {
    if (rel == own) refuse("a file of the run " + input);
  }
}

}  // namespace rm::cli

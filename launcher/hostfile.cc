#include "launcher/hostfile.h"

#include <cstdint>
#include <cstdio>
#include <sstream>

#include "configs/config_error.h"
#include "io/io_error.h"
#include "io/posix_io.h"

namespace rm {
namespace {

constexpr uint64_t kMaxHostfileBytes = 16 << 20;  // a line per host: some 100,000 hosts
constexpr int64_t kMaxSlots = int64_t{1} << 20;   // the most ranks a job may have (--nproc)

[[noreturn]] void bad(const std::string& path, int line, const std::string& message) {
  ConfigError e;
  e.file = path;
  e.line = line;
  e.col = line > 0 ? 1 : 0;
  e.message = message;
  throw JobConfigError({e}, "the hostfile");
}

// A positive slot count, or -1.
int parse_slots(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  const int n = std::stoi(text);
  return n > 0 ? n : -1;
}

// Open MPI's rule for a node name (it refuses anything else as "an illegal character").
constexpr char kHostNameChars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";

// "slots = 2" as "slots=2": Open MPI reads both.
std::string spaced_equals_joined(std::string text) {
  for (size_t eq = text.find('='); eq != std::string::npos; eq = text.find('=', eq + 1)) {
    size_t before = eq;
    while (before > 0 && (text[before - 1] == ' ' || text[before - 1] == '\t')) --before;
    text.erase(before, eq - before);
    eq = before;
    size_t after = eq + 1;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    text.erase(eq + 1, after - eq - 1);
  }
  return text;
}

// A name as a message may show it: bytes outside printable ASCII as \xNN, cut at 80.
std::string printable(const std::string& name) {
  std::string out;
  for (const unsigned char c : name.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return name.size() > 80 ? out + "..." : out;
}

}  // namespace

std::vector<HostSlots> read_hostfile(const std::string& path) {
  // Through io/: a FIFO or /dev/zero is refused at once (before: waited on for ever, or read
  // without end), and so is a file larger than any cluster's hostfile.
  std::string contents;
  try {
    contents = io::read_file(path, kMaxHostfileBytes);
  } catch (const IoError& e) {
    bad(path, 0, std::string("--hosts: cannot read the hostfile: ") + e.what());
  }
  std::istringstream in(contents);
  std::vector<HostSlots> hosts;
  std::vector<int> first_lines;  // beside hosts: the line each was first named on
  int64_t total = 0;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    // Open MPI's hostfile parser takes a carriage return for part of a name, then fails with an
    // internal error once the run directory is written: said here, before anything is.
    if (text.find('\r') != std::string::npos) {
      bad(path, line,
          "a carriage return (a Windows line ending), which Open MPI cannot parse: convert the "
          "file (dos2unix, or sed -i 's/\\r$//')");
    }
    if (const auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream words(spaced_equals_joined(text));
    std::string host, word;
    if (!(words >> host)) continue;
    if (host.find('=') != std::string::npos) bad(path, line, "expected a host name first, got '" + host + "'");
    if (host.size() > 253) {
      bad(path, line,
          "a host name of " + std::to_string(host.size()) +
              " characters: DNS names have at most 253");
    }
    if (const size_t at = host.find_first_not_of(kHostNameChars); at != std::string::npos) {
      bad(path, line,
          "'" + printable(host) +
              "' is not a host name: Open MPI takes letters, digits, '.' "
              "and '-' only" +
              (host[at] == ':' ? " (a slot count is written 'host slots=N', not 'host:N')" : ""));
    }
    bool slots_given = false;
    int slots = 1, max_slots = 0;
    while (words >> word) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (key == "slots" || key == "max_slots" || key == "max-slots") {
        const int n = parse_slots(value);
        if (n < 0) bad(path, line, key + " must be a positive number, not '" + value + "'");
        (key == "slots" ? slots : max_slots) = n;
        slots_given = slots_given || key == "slots";
      } else {
        bad(path, line, "unknown key '" + key + "' (expected slots=N or max_slots=N)");
      }
    }
    // mpirun refuses it, once the run directory is written: said here, before anything is.
    if (max_slots > 0 && max_slots < slots) {
      bad(path, line,
          "max_slots=" + std::to_string(max_slots) +
              " is less than slots=" + std::to_string(slots) + " (Open MPI refuses that)");
    }
    // Summed in 64 bits and bounded: 2,200 lines of slots=999999 wrapped an int negative.
    total += slots;
    if (total > kMaxSlots) {
      bad(path, line,
          "more than " + std::to_string(kMaxSlots) +
              " slots in all, the most ranks a job may have");
    }
    // A host named again adds its slots, as Open MPI counts a line per slot; but Open MPI
    // refuses a slot count given on a later line of a host already named.
    size_t i = 0;
    while (i < hosts.size() && hosts[i].host != host) ++i;
    if (i == hosts.size()) {
      hosts.push_back({host, slots});
      first_lines.push_back(line);
      continue;
    }
    if (slots_given) {
      bad(path, line,
          "'" + host + "' is named again (first on line " + std::to_string(first_lines[i]) +
              ") with slots=: Open MPI refuses a second slot count for a host; name it once "
              "with slots=N");
    }
    hosts[i].slots += slots;
  }
  if (hosts.empty()) bad(path, 0, "--hosts: the hostfile names no host");
  return hosts;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.slots;
  return n;
}

}  // namespace rm

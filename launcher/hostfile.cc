#include "launcher/hostfile.h"

#include <cstdint>
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
  int64_t total = 0;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (const auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream words(text);
    std::string host, word;
    if (!(words >> host)) continue;
    if (host.find('=') != std::string::npos) bad(path, line, "expected a host name first, got '" + host + "'");
    if (host.size() > 253) {
      bad(path, line,
          "a host name of " + std::to_string(host.size()) +
              " characters: DNS names have at most 253");
    }
    int slots = 1, max_slots = 0;
    while (words >> word) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (key == "slots" || key == "max_slots" || key == "max-slots") {
        const int n = parse_slots(value);
        if (n < 0) bad(path, line, key + " must be a positive number, not '" + value + "'");
        (key == "slots" ? slots : max_slots) = n;
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
    bool known = false;
    for (auto& h : hosts) {
      if (h.host == host) {
        h.slots += slots;
        known = true;
      }
    }
    if (!known) hosts.push_back({host, slots});
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

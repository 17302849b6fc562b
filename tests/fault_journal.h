// The fault layer's journal (io/journal_format.h, written under RM_TEST_IO_FAULT) read the way
// the CLI crash tests need it: each rank's counted calls in order, with the checkpoint phase each
// was made in, and where the rank was last seen -- which, for a rank that was killed, is where
// the kill landed. Phases are the rank's own "P" notes (checkpoint_writer.h lists them).
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/journal_format.h"
#include "io/posix_io.h"

namespace rm::test {

struct JournalCall {
  int64_t n = 0;      // its number among the rank's counted calls (1-based)
  std::string kind;   // "create", "write", "fsync", "rename", "unlink", ...
  std::string path;   // absolute
  std::string phase;  // the rank's last phase note before it ("" if none)
};

struct RankJournal {
  std::vector<JournalCall> calls;  // only the counting rank (RM_TEST_IO_FAULT rank=R) has them
  std::string last_phase;          // its last phase note ("" if none)
  bool call_after_phase = false;   // whether its last record is a call rather than that note
};

struct FaultJournal {
  std::map<int, RankJournal> ranks;
  int commits = 0;  // "commit:done" notes: saves whose commit returned before the end
  const RankJournal& rank(int r) const {
    static const RankJournal kNone;
    const auto it = ranks.find(r);
    return it == ranks.end() ? kNone : it->second;
  }
};

inline FaultJournal read_fault_journal(const std::string& path) {
  FaultJournal j;
  std::istringstream lines(io::read_file(path));
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> f = io::split_journal_line(line);
    if (f.size() == 5 && f[0] == "K") {
      RankJournal& r = j.ranks[std::stoi(f[4])];
      r.calls.push_back(JournalCall{std::stoll(f[1]), f[2], f[3], r.last_phase});
      r.call_after_phase = true;
    } else if (f.size() == 3 && f[0] == "P" && f[1].find(':') != std::string::npos) {
      RankJournal& r = j.ranks[std::stoi(f[2])];
      r.last_phase = f[1];
      r.call_after_phase = false;
      if (f[1] == "commit:done") ++j.commits;
    }
  }
  return j;
}

// The path of the fsync that the fault layer left out as the K-th of its process (skip_fsync=K):
// the fsync call that rank recorded just before its "skipped fsync K" note. "" if the journal
// has no such note: the run never reached that fsync, so nothing was left out.
inline std::string skipped_fsync_path(const std::string& journal, int64_t k) {
  std::istringstream lines(io::read_file(journal));
  std::map<std::string, std::string> last_fsync;  // rank -> the path of its last counted fsync
  const std::string note = "skipped fsync " + std::to_string(k);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> f = io::split_journal_line(line);
    if (f.size() == 5 && f[0] == "K" && f[2] == "fsync") last_fsync[f[4]] = f[3];
    if (f.size() == 3 && f[0] == "P" && f[1] == note) return last_fsync[f[2]];
  }
  return "";
}

// The part of a save a rank was in at its last record, named as the crash tests report it:
// "write", "fsync", "read back", "descriptor" (its shard), "collect" (rank 0 waiting for the
// others' shards), "commit check", "manifest", "rename", "rename fsync", "retention", "prepare"
// (making the scratch directory), "between saves" (its part of the last save was over), or "before
// any save".
inline std::string save_part(const std::string& phase, int rank) {
  static const std::map<std::string, std::string> kParts = {{"", "before any save"},
                                                            {"shard:prepare", "prepare"},
                                                            {"shard:write", "write"},
                                                            {"shard:fsync", "fsync"},
                                                            {"shard:verify", "read back"},
                                                            {"shard:descriptor", "descriptor"},
                                                            {"commit:prepare", "commit check"},
                                                            {"commit:manifest", "manifest"},
                                                            {"commit:rename", "rename"},
                                                            {"commit:fsync", "rename fsync"},
                                                            {"commit:done", "between saves"},
                                                            {"retention:delete", "retention"},
                                                            {"retention:done", "between saves"}};
  if (phase == "shard:done") return rank == 0 ? "collect" : "between saves";
  const auto it = kParts.find(phase);
  return it == kParts.end() ? "unknown phase " + phase : it->second;
}

}  // namespace rm::test

// Simulated power loss: replays a fault journal (fault_file_system.h) onto the real disk, after
// every process that wrote it is dead, so that the disk holds what a machine that lost power at
// that moment would find on reboot:
//   - every directory-entry change (create, mkdir, unlink, rmdir, rename, exchange) that its
//     directory had not fsynced since is undone, newest first (a removed or replaced file comes
//     back from the journal's stash);
//   - kDropUnsynced: every file is cut back to the bytes its last fsync covered (a file created
//     or truncated and never fsynced ends empty, as on ext4 after delayed allocation);
//     kKeepWritten: file contents stay as written, including a torn last write (the page cache
//     reached the disk, the directory updates did not).
// Uses the system calls directly (never fs()), so it works with a FaultFileSystem installed.
// Not thread-safe; nothing may write under `scope` meanwhile. Throws IoError on an unreadable
// journal; an undo that finds nothing to undo (the call never happened) is skipped.
#pragma once

#include <string>
#include <vector>

namespace rm {
namespace io {

enum class CutMode { kDropUnsynced, kKeepWritten };

struct PowerCutReport {
  int entries_undone = 0;    // directory-entry changes reverted
  int files_truncated = 0;   // files cut back to their durable size
  std::string summary() const;
};

PowerCutReport apply_power_cut(const std::string& journal, const std::string& scope,
                               CutMode mode = CutMode::kDropUnsynced);

// True when the journal shows a rename onto `to` (an absolute path) that a later fsync of its
// directory made durable: what a crash test asks to know which checkpoint must survive.
bool rename_made_durable(const std::string& journal, const std::string& to);

// The targets of every rename the journal shows made (its "O" record), durable or not, in order:
// what a process crash, which keeps the page cache, keeps.
std::vector<std::string> renames_made(const std::string& journal);

}  // namespace io
}  // namespace rm

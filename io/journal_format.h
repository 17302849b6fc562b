// The record format shared by the fault journal's writer (fault_file_system.cc) and its replay
// (power_cut.cc): one line per record, fields separated by tabs (paths may hold spaces, never a
// tab or a newline in a run directory Ringmaster writes). Internal to io/.
//
//   K n kind path rank           a counted call of that rank, before it is made
//   T ino path                   a file was created or truncated: nothing of it is durable yet
//   A ino size                   an existing file opened to append: its first `size` bytes
//                                are taken as durable (unless an earlier T/S says otherwise)
//   S ino size                   fsync of a file returned: its first `size` bytes are durable
//   E id dir_ino create isdir path
//   E id dir_ino unlink stash path
//   E id dir_ino rmdir path own_ino
//   E id dir_ino rename to_dir_ino stash from to
//   E id dir_ino exchange to_dir_ino a b
//                                a directory-entry change, written BEFORE it is made, with what
//                                undoing it needs (stash: a hard link to the file it removes or
//                                replaces, or "-"). Paths are as they were then; the replay
//                                finds each directory by its inode, since a later durable
//                                rename (step_N.tmp -> step_N) may have moved it.
//   O id / F id                  that change was made / failed (nothing to undo); ids are
//                                unique across the processes sharing the journal (pid << 32 | n)
//   P text rank                  a note of that rank: the checkpoint phase it enters
//                                (checkpoint_writer.h), or "skipped fsync K"
//   Y id dir_ino                 fsync of a directory begins
//   Z id                         ... and returned: every change of that directory recorded "O"
//                                before its Y is durable
#pragma once

#include <string>
#include <vector>

namespace rm {
namespace io {

inline std::string journal_line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += '\t';
    line += fields[i];
  }
  return line;
}

inline std::vector<std::string> split_journal_line(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos
                                                                 : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

inline std::string stash_dir_of(const std::string& journal) {
  return journal + ".stash";
}

}  // namespace io
}  // namespace rm

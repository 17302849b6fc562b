#include "io/power_cut.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "io/journal_format.h"
#include "io/posix_io.h"

namespace rm {
namespace io {
namespace {

struct EntryChange {
  size_t pos = 0;               // line of its E record
  std::vector<std::string> f;   // the E record's fields
  size_t done = 0;              // line of its O record; 0: not known to have happened
  bool failed = false;
};

uint64_t num(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, 10);
}

bool present(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Plain recursive removal with the system calls (no fs(), no fsync: the machine is "off").
void remove_all(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string& name : list_dir(path)) remove_all(join(path, name));
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

void undo(const EntryChange& c) {
  const std::string& kind = c.f[3];
  if (kind == "create") {  // E id dir create isdir path
    remove_all(c.f[5]);
  } else if (kind == "unlink") {  // E id dir unlink stash path
    if (!present(c.f[5]) && c.f[4] != "-") ::link(c.f[4].c_str(), c.f[5].c_str());
  } else if (kind == "rmdir") {  // E id dir rmdir path
    if (!present(c.f[4])) ::mkdir(c.f[4].c_str(), 0755);
  } else if (kind == "rename") {  // E id dir rename to_dir stash from to
    const std::string &stash = c.f[5], &from = c.f[6], &to = c.f[7];
    if (present(from) || !present(to)) return;  // it never happened
    ::rename(to.c_str(), from.c_str());
    if (stash != "-") ::link(stash.c_str(), to.c_str());
  } else if (kind == "exchange") {  // E id dir exchange to_dir a b
    if (present(c.f[5]) && present(c.f[6])) {
      ::renameat2(AT_FDCWD, c.f[5].c_str(), AT_FDCWD, c.f[6].c_str(), RENAME_EXCHANGE);
    }
  }
}

void collect_files(const std::string& path, std::map<uint64_t, std::vector<std::string>>* out,
                   int depth) {
  struct stat st;
  if (depth > 32 || ::lstat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) {
    (*out)[static_cast<uint64_t>(st.st_ino)].push_back(path);
  } else if (S_ISDIR(st.st_mode)) {
    for (const std::string& name : list_dir(path)) collect_files(join(path, name), out, depth + 1);
  }
}

}  // namespace

std::string PowerCutReport::summary() const {
  return std::to_string(entries_undone) + " directory change(s) undone, " +
         std::to_string(files_truncated) + " file(s) cut back to their last fsync";
}

PowerCutReport apply_power_cut(const std::string& journal, const std::string& scope,
                               CutMode mode) {
  std::istringstream in(read_file(journal));
  std::vector<EntryChange> changes;
  std::map<uint64_t, size_t> change_by_id;
  std::map<uint64_t, std::vector<size_t>> synced_dirs;  // dir ino -> lines of completed Y
  std::map<uint64_t, std::pair<size_t, uint64_t>> dir_sync_by_id;  // id -> (line, dir ino)
  std::map<uint64_t, uint64_t> durable_size;                      // file ino -> bytes
  std::string line;
  for (size_t pos = 1; std::getline(in, line); ++pos) {
    std::vector<std::string> f = split_journal_line(line);
    const std::string& r = f[0];
    if (r == "E" && f.size() >= 5) {
      change_by_id[num(f[1])] = changes.size();
      changes.push_back(EntryChange{pos, std::move(f), 0, false});
    } else if ((r == "O" || r == "F") && f.size() == 2) {
      const auto it = change_by_id.find(num(f[1]));
      if (it == change_by_id.end()) continue;
      if (r == "O") changes[it->second].done = pos;
      if (r == "F") changes[it->second].failed = true;
    } else if (r == "Y" && f.size() == 3) {
      dir_sync_by_id[num(f[1])] = {pos, num(f[2])};
    } else if (r == "Z" && f.size() == 2) {
      const auto it = dir_sync_by_id.find(num(f[1]));
      if (it != dir_sync_by_id.end()) synced_dirs[it->second.second].push_back(it->second.first);
    } else if (r == "T" && f.size() == 3) {
      durable_size[num(f[1])] = 0;
    } else if (r == "A" && f.size() == 3) {
      durable_size.emplace(num(f[1]), num(f[2]));
    } else if (r == "S" && f.size() == 3) {
      durable_size[num(f[1])] = num(f[2]);
    }
  }

  // A change is durable once a directory fsync that began after it was made has returned.
  const auto synced_after = [&](uint64_t dir, size_t done) {
    const auto it = synced_dirs.find(dir);
    if (it == synced_dirs.end()) return false;
    for (size_t y : it->second) {
      if (y > done) return true;
    }
    return false;
  };
  PowerCutReport report;
  for (auto c = changes.rbegin(); c != changes.rend(); ++c) {
    if (c->failed) continue;
    const std::string& kind = c->f[3];
    const bool two_dirs = kind == "rename" || kind == "exchange";
    bool durable = c->done > 0 && synced_after(num(c->f[2]), c->done);
    if (durable && two_dirs) durable = synced_after(num(c->f[4]), c->done);
    if (durable) continue;
    undo(*c);
    ++report.entries_undone;
  }

  if (mode == CutMode::kDropUnsynced) {
    std::map<uint64_t, std::vector<std::string>> files;
    collect_files(scope, &files, 0);
    for (const auto& [ino, paths] : files) {
      const auto it = durable_size.find(ino);
      if (it == durable_size.end()) continue;  // never written under the fault layer
      struct stat st;
      if (::lstat(paths[0].c_str(), &st) != 0) continue;
      if (static_cast<uint64_t>(st.st_size) > it->second) {
        if (::truncate(paths[0].c_str(), static_cast<off_t>(it->second)) != 0) {
          throw_errno(paths[0], "power cut: cannot truncate", errno);
        }
        ++report.files_truncated;
      }
    }
  }
  return report;
}

}  // namespace io
}  // namespace rm

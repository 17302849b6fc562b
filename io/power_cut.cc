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

// Where the directories under the scope are now, by inode; directories an undo recreated are
// found under their old inode too (aliases).
class DirIndex {
 public:
  explicit DirIndex(const std::string& scope) : scope_(scope) { rescan(); }
  void rescan() {
    paths_.clear();
    scan(parent_dir(scope_), 0, /*only=*/scope_);
  }
  void alias(uint64_t old_ino, const std::string& path) { aliases_[old_ino] = path; }
  // The current path of the entry `recorded` (a path as journaled) of directory `dir_ino`.
  std::string locate(uint64_t dir_ino, const std::string& recorded) const {
    const std::string name = base_name(recorded);
    if (const auto it = paths_.find(dir_ino); it != paths_.end()) return join(it->second, name);
    if (const auto it = aliases_.find(dir_ino); it != aliases_.end()) {
      return join(it->second, name);
    }
    return recorded;
  }

 private:
  void scan(const std::string& path, int depth, const std::string& only = "") {
    struct stat st;
    if (depth > 32 || ::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
    paths_[static_cast<uint64_t>(st.st_ino)] = path;
    for (const std::string& name : list_dir(path)) {
      const std::string child = join(path, name);
      if (!only.empty() && child != only) continue;  // the scope's parent: only the scope
      scan(child, depth + 1);
    }
  }

  std::string scope_;
  std::map<uint64_t, std::string> paths_, aliases_;
};

void undo(const EntryChange& c, DirIndex& dirs) {
  const std::string& kind = c.f[3];
  const uint64_t dir = num(c.f[2]);
  if (kind == "create") {  // E id dir create isdir path
    remove_all(dirs.locate(dir, c.f[5]));
  } else if (kind == "unlink") {  // E id dir unlink stash path
    const std::string path = dirs.locate(dir, c.f[5]);
    if (!present(path) && c.f[4] != "-") ::link(c.f[4].c_str(), path.c_str());
  } else if (kind == "rmdir") {  // E id dir rmdir path own_ino
    const std::string path = dirs.locate(dir, c.f[4]);
    if (!present(path) && ::mkdir(path.c_str(), 0755) == 0 && c.f.size() > 5) {
      dirs.alias(num(c.f[5]), path);
    }
  } else if (kind == "rename") {  // E id dir rename to_dir stash from to
    const std::string from = dirs.locate(dir, c.f[6]), to = dirs.locate(num(c.f[4]), c.f[7]);
    const std::string& stash = c.f[5];
    if (present(from) || !present(to)) return;  // it never happened
    ::rename(to.c_str(), from.c_str());
    if (stash != "-") ::link(stash.c_str(), to.c_str());
  } else if (kind == "exchange") {  // E id dir exchange to_dir a b
    const std::string a = dirs.locate(dir, c.f[5]), b = dirs.locate(num(c.f[4]), c.f[6]);
    if (present(a) && present(b)) {
      ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
    }
  }
  dirs.rescan();
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

// The journal, parsed: its directory changes and what made them and the files durable.
struct Journal {
  std::vector<EntryChange> changes;
  std::map<uint64_t, std::vector<size_t>> synced_dirs;  // dir ino -> lines of completed Y
  std::map<uint64_t, uint64_t> durable_size;            // file ino -> bytes

  explicit Journal(const std::string& path) {
    std::istringstream in(read_file(path));
    std::map<uint64_t, size_t> change_by_id;
    std::map<uint64_t, std::pair<size_t, uint64_t>> dir_sync_by_id;  // id -> (line, dir ino)
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
  }

  // A change is durable once a directory fsync that began after it was made has returned (for
  // a rename or an exchange: of both directories).
  bool durable(const EntryChange& c) const {
    if (c.done == 0) return false;
    const auto synced_after = [&](uint64_t dir) {
      const auto it = synced_dirs.find(dir);
      if (it == synced_dirs.end()) return false;
      for (size_t y : it->second) {
        if (y > c.done) return true;
      }
      return false;
    };
    const std::string& kind = c.f[3];
    const bool two_dirs = kind == "rename" || kind == "exchange";
    return synced_after(num(c.f[2])) && (!two_dirs || synced_after(num(c.f[4])));
  }
};

}  // namespace

std::string PowerCutReport::summary() const {
  return std::to_string(entries_undone) + " directory change(s) undone, " +
         std::to_string(files_truncated) + " file(s) cut back to their last fsync";
}

bool rename_made_durable(const std::string& journal, const std::string& to) {
  const Journal j(journal);
  for (const EntryChange& c : j.changes) {
    if (c.f[3] == "rename" && c.f.size() == 8 && c.f[7] == to && !c.failed && j.durable(c)) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> renames_made(const std::string& journal) {
  const Journal j(journal);
  std::vector<std::string> out;
  for (const EntryChange& c : j.changes) {
    if (c.f[3] == "rename" && c.f.size() == 8 && c.done != 0) out.push_back(c.f[7]);
  }
  return out;
}

PowerCutReport apply_power_cut(const std::string& journal, const std::string& scope,
                               CutMode mode) {
  const Journal j(journal);
  PowerCutReport report;
  DirIndex dirs(scope);
  for (auto c = j.changes.rbegin(); c != j.changes.rend(); ++c) {
    if (c->failed || j.durable(*c)) continue;
    undo(*c, dirs);
    ++report.entries_undone;
  }

  if (mode == CutMode::kDropUnsynced) {
    std::map<uint64_t, std::vector<std::string>> files;
    collect_files(scope, &files, 0);
    for (const auto& [ino, paths] : files) {
      const auto it = j.durable_size.find(ino);
      if (it == j.durable_size.end()) continue;  // never written under the fault layer
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

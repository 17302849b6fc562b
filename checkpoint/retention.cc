#include "checkpoint/retention.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "io/atomic_file.h"
#include "io/file_system.h"
#include "io/io_error.h"
#include "io/posix_io.h"

namespace rm {
namespace {

struct ScannedDir {
  std::string name;
  int64_t step;
  bool committed;
};

std::vector<ScannedDir> scan_newest_first(const std::string& root) {
  std::vector<ScannedDir> out;
  for (const std::string& name : io::list_dir(root)) {
    const auto parsed = parse_step_dir_name(name);
    if (parsed && io::is_directory(io::join(root, name))) {
      out.push_back(ScannedDir{name, parsed->step, parsed->committed});
    }
  }
  std::sort(out.begin(), out.end(), [](const ScannedDir& a, const ScannedDir& b) {
    return a.step != b.step ? a.step > b.step : a.committed > b.committed;
  });
  return out;
}

// Removes the committed checkpoint checkpoints/NAME: renamed away (NAME.del.tmp) while claimed,
// then emptied. A crash leaves scratch, never a half-removed checkpoint that looks committed. A
// reader's pin is waited for until `deadline` (said once), or until wait.cut_short() says so;
// then the checkpoint is left to it (a later retention's), or with `even_if_read` removed all the
// same (the reader then fails; said). False: left to its reader.
bool remove_committed(const std::string& root, const std::string& name,
                      std::chrono::steady_clock::time_point deadline, const ReaderWait& wait,
                      bool even_if_read) {
  const std::string path = io::join(root, name);
  const std::string scratch = path + kDeletingSuffix;
  io::remove_tree(scratch);  // a leftover of an earlier, interrupted deletion
  io::Fd claim;  // held until the checkpoint is renamed away: no reader pins it meanwhile
  const auto began = std::chrono::steady_clock::now();
  for (bool said = false; !claim_for_removal(path, &claim); said = true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || (wait.cut_short && wait.cut_short())) {
      if (!even_if_read) {
        if (said) {
          std::printf("ringmaster: %s: its reader still holds it: kept, for a later retention\n",
                      path.c_str());
          std::fflush(stdout);
        }
        return false;
      }
      std::printf(
          "ringmaster: %s: removed while a reader (eval, export, another run's --from?) still "
          "held it, after waiting %.1f s; that reader fails\n",
          path.c_str(), std::chrono::duration<double>(now - began).count());
      std::fflush(stdout);
      break;
    }
    if (!said) {
      std::printf(
          "ringmaster: %s: waiting up to %.1f s for its reader to finish before it is "
          "removed\n",
          path.c_str(), std::chrono::duration<double>(deadline - now).count());
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  io::rename_path(path, scratch);
  io::fsync_directory(root);
  // A checkpoint made read-only to keep it is renamed all the same (that needs only
  // checkpoints/ writable) and then not removed: if nothing of it went, it gets its name
  // back, or it would be kept under a scratch name no resume lists, and that the next
  // start could not remove either.
  const std::vector<std::string> files = io::list_dir(scratch);
  try {
    io::remove_tree(scratch);
  } catch (const IoError&) {
    if (io::list_dir(scratch).size() == files.size() && !io::exists(path)) {
      io::rename_path(scratch, path);
      io::fsync_directory(root);
    }
    throw;
  }
  return true;
}

// Removes checkpoints/NAME, a committed checkpoint (unless a reader pins it: a later retention's)
// or scratch, appending its path to *removed once it is gone.
void remove_doomed(const std::string& root, const std::string& name,
                   std::chrono::steady_clock::time_point deadline, const ReaderWait& wait,
                   std::vector<std::string>* removed) {
  checkpoint_phase("retention:delete");
  const std::string path = io::join(root, name);
  if (parse_step_dir_name(name)->committed) {
    if (remove_committed(root, name, deadline, wait, false)) removed->push_back(path);
    return;
  }
  removed->push_back(path);
  io::remove_tree(path);  // files, then the directory, then fsync checkpoints/
}

// Points checkpoints/best at the best of entries[first..] that committed_and_whole(i) accepts:
// of those whose manifest state says "best": true with a numeric best_val_loss, the lowest loss,
// the newest of equals. Where there is none, a link left there is removed if keep_best is off
// (what it points to is no longer kept) or it leads nowhere. Returns the best's name, or "".
template <typename WholeFn>
std::string link_best(const std::string& root, const std::vector<ScannedDir>& entries, size_t first,
                      bool keep_best, WholeFn committed_and_whole) {
  std::string best;
  double best_loss = 0;
  for (size_t i = first; keep_best && i < entries.size(); ++i) {
    if (!committed_and_whole(i)) continue;
    const nlohmann::json& state = load_manifest(io::join(root, entries[i].name)).state;
    if (!state.is_object() || !state.value("best", false)) continue;
    const auto loss = state.find("best_val_loss");
    if (loss == state.end() || !loss->is_number()) continue;
    if (best.empty() || loss->get<double>() < best_loss) {
      best = entries[i].name;
      best_loss = loss->get<double>();
    }
  }
  const std::string link = io::join(root, kBestLink);
  if (!best.empty()) {
    // A pointer only: a file system without symbolic links costs the link, not the save.
    try {
      io::replace_symlink(best, link);
    } catch (const IoError& e) {
      std::fprintf(stderr, "ringmaster: %s (the best checkpoint, %s, is kept all the same)\n",
                   e.what(), best.c_str());
    }
    return best;
  }
  // Only where there is a link (no call of the file system otherwise: the fault tests count
  // them). stat follows the link: it fails where the link leads nowhere.
  struct stat st;
  if (::lstat(link.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
      (!keep_best || ::stat(link.c_str(), &st) != 0)) {
    io::unlink_file(link);
  }
  return best;
}

}  // namespace

std::vector<std::string> apply_retention(const std::string& run_dir, int keep, int64_t keep_every,
                                         bool keep_best, const ReaderWait& wait,
                                         int64_t read_back_step) {
  if (keep < 1) {
    throw CheckpointError(run_dir + ": retention must keep at least one checkpoint (keep=" +
                          std::to_string(keep) + ")");
  }
  std::vector<std::string> removed;
  const std::string root = checkpoints_root(run_dir);
  if (!io::is_directory(root)) return removed;
  const std::vector<ScannedDir> entries = scan_newest_first(root);

  size_t anchor = entries.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    // The one just committed was read back by its writers; an older one is read here.
    const VerifyLevel level =
        entries[i].step == read_back_step ? VerifyLevel::kStructure : VerifyLevel::kChecksums;
    if (entries[i].committed && verify_checkpoint(io::join(root, entries[i].name), level).ok) {
      anchor = i;
      break;
    }
  }
  if (anchor == entries.size()) return removed;

  // Whether entry i is committed and verifies structurally, checked once whichever loop asks.
  std::vector<int> structure(entries.size(), -1);
  const auto committed_and_whole = [&](size_t i) {
    if (structure[i] < 0) {
      structure[i] = entries[i].committed &&
                     verify_checkpoint(io::join(root, entries[i].name), VerifyLevel::kStructure).ok;
    }
    return structure[i] == 1;
  };
  // The best: from the anchor down (a newer one failed verification).
  const std::string best = link_best(root, entries, anchor, keep_best, committed_and_whole);

  int kept = 1;  // the anchor
  std::vector<std::string> doomed;
  for (size_t i = anchor + 1; i < entries.size(); ++i) {
    const ScannedDir& e = entries[i];
    if (!e.committed) {
      // Scratch of a step at or before the anchor's (sorted after the anchor): stale, as every
      // rank had finished that step's save before the anchor could be committed.
      doomed.push_back(e.name);
      continue;
    }
    if (!committed_and_whole(i)) continue;  // leave for a person
    if (e.name == best) {  // kept whatever; one of the keep newest if it is among them
      if (kept < keep) ++kept;
      continue;
    }
    if (kept < keep) {
      ++kept;
    } else if (!(keep_every > 0 && e.step % keep_every == 0)) {
      doomed.push_back(e.name);
    }
  }

  // One that cannot be removed does not keep the others: the first error is thrown once every
  // one has been tried (the paths removed are then not returned).
  std::exception_ptr first_error;
  const auto deadline = std::chrono::steady_clock::now() + wait.limit;  // for all of them
  for (const std::string& name : doomed) {
    try {
      remove_doomed(root, name, deadline, wait, &removed);
    } catch (const IoError&) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (!doomed.empty()) io::fs().note("retention:done");  // for the fault journal
  if (first_error) std::rethrow_exception(first_error);
  return removed;
}

void remove_checkpoints_of_run(const std::vector<std::string>& ckpt_dirs, const ReaderWait& wait) {
  for (const std::string& dir : ckpt_dirs) {
    const auto parsed = parse_step_dir_name(io::base_name(dir));
    if (!parsed || !parsed->committed) {
      throw CheckpointError(dir + ": not a committed checkpoint's directory (step_N)");
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + wait.limit;  // for all of them
  for (const std::string& dir : ckpt_dirs) {
    checkpoint_phase("from:drop");  // the crash tests' kill point (savekill)
    remove_committed(io::parent_dir(dir), io::base_name(dir), deadline, wait, true);
  }
}

std::string relink_best_checkpoint(const std::string& run_dir, bool keep_best) {
  const std::string root = checkpoints_root(run_dir);
  if (!io::is_directory(root)) return "";
  const std::vector<ScannedDir> entries = scan_newest_first(root);
  return link_best(root, entries, 0, keep_best, [&](size_t i) {
    return entries[i].committed &&
           verify_checkpoint(io::join(root, entries[i].name), VerifyLevel::kStructure).ok;
  });
}

}  // namespace rm

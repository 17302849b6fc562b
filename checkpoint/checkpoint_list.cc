// verify_checkpoint, list_checkpoints, find_resume_checkpoint (declared in checkpoint_reader.h).
#include <sys/stat.h>

#include <algorithm>
#include <tuple>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/checkpoint_reader.h"
#include "io/posix_io.h"

namespace rm {
namespace {

struct ListedDir {
  std::string path;
  StepDirName name;
};

// The checkpoint directories under RUN_DIR/checkpoints/, sorted by (step, committed).
std::vector<ListedDir> scan(const std::string& run_dir) {
  std::vector<ListedDir> out;
  const std::string root = checkpoints_root(run_dir);
  if (!io::exists(root)) return out;
  for (const std::string& name : io::list_dir(root)) {
    const auto parsed = parse_step_dir_name(name);
    const std::string path = io::join(root, name);
    if (parsed && io::is_directory(path)) out.push_back(ListedDir{path, *parsed});
  }
  std::sort(out.begin(), out.end(), [](const ListedDir& a, const ListedDir& b) {
    return std::tie(a.name.step, a.name.committed) < std::tie(b.name.step, b.name.committed);
  });
  return out;
}

// What a scratch directory is, by its name: the saves' step_N.tmp is one never committed, but
// retention's step_N.del.tmp and a re-save's step_N.replaced.tmp were committed checkpoints.
VerifyResult incomplete(const ListedDir& e) {
  const std::string& path = e.path;
  VerifyResult r;
  if (e.name.suffix == kDeletingSuffix) {
    r.error = path + ": a checkpoint being deleted by retention (or left by a crash as it was)";
  } else if (e.name.suffix == kReplacedSuffix) {
    r.error = path +
              ": the copy a re-save of this step moved aside (put back by the next start "
              "if the new one is missing)";
  } else {
    r.error = path + ": incomplete (never committed)";
  }
  return r;
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const std::string& name : io::list_dir(dir)) {
    struct stat st;
    if (::lstat(io::join(dir, name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_size);
    }
  }
  return total;
}

CheckpointInfo describe(const ListedDir& e, VerifyResult verify) {
  CheckpointInfo info;
  info.path = e.path;
  info.step = e.name.step;
  info.committed = e.name.committed;
  info.verify = std::move(verify);
  // Size and time are informational: a directory that vanishes meanwhile (retention in another
  // process) reads as zero rather than failing the whole listing.
  try {
    info.bytes = dir_bytes(e.path);
    const std::string manifest = io::join(e.path, kManifestFileName);
    info.mtime_unix = io::mtime_unix(io::exists(manifest) ? manifest : e.path);
  } catch (const CheckpointError&) {
  } catch (const IoError&) {
  }
  return info;
}

}  // namespace

VerifyResult verify_checkpoint(const std::string& ckpt_dir, VerifyLevel level,
                               const VerifyShare& share) {
  VerifyResult result;
  const auto pin = CheckpointPin::take(ckpt_dir);
  if (!pin) {
    result.gone = true;
    result.error = ckpt_dir +
                   ": no such directory (a live run's retention removes its older "
                   "checkpoints as it saves)";
    return result;
  }
  try {
    CheckpointReader reader(pin->path());
    const Manifest& m = reader.manifest();
    result.step = m.step;
    result.data_bytes = m.data_bytes();
    // (The reader refused a manifest whose step is not its directory's name.)
    result.hashed_bytes = reader.verify_share(share, level);
    result.ok = true;
  } catch (const CheckpointError& e) {
    result.error = e.what();
  } catch (const IoError& e) {  // a file missing, unreadable, or no regular file
    result.error = e.what();
  } catch (const std::bad_alloc&) {
    result.error = ckpt_dir + ": out of memory while verifying";
  }
  // Removed while it was read, where the pin could not keep retention away (NFS): no damage.
  if (!result.ok && !pin->still_there()) result.gone = true;
  return result;
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& run_dir, VerifyLevel level) {
  std::vector<CheckpointInfo> out;
  for (const ListedDir& e : scan(run_dir)) {
    VerifyResult v = e.name.committed ? verify_checkpoint(e.path, level) : incomplete(e);
    if (v.gone) continue;
    CheckpointInfo info = describe(e, std::move(v));
    // A scratch directory gone while it was listed (committed, or deleted) is not listed.
    if (!e.name.committed && !io::exists(e.path)) continue;
    out.push_back(std::move(info));
  }
  return out;
}

bool holds_committed_checkpoint(const std::string& run_dir) {
  try {
    const std::string root = checkpoints_root(run_dir);
    if (!io::is_directory(root)) return false;
    for (const std::string& name : io::list_dir(root)) {  // the names say it: no manifest read
      const auto parsed = parse_step_dir_name(name);
      if (parsed && parsed->committed) return true;
    }
  } catch (const std::exception&) {
    return true;
  }
  return false;
}

std::optional<CheckpointInfo> find_resume_checkpoint(const std::string& run_dir,
                                                     std::vector<std::string>* report,
                                                     const CheckpointVerifier& verify) {
  // Each look that meets a vanished checkpoint means the run saved a newer one meanwhile, so it
  // starts over from the newest; the last look (a run saving faster than this reads) goes on to
  // the older ones instead.
  constexpr int kLooks = 20;
  std::vector<std::string> passed_over;
  for (int look = 0; look < kLooks; ++look) {
    passed_over.clear();
    bool vanished = false;
    const bool last_look = look == kLooks - 1;
    const std::vector<ListedDir> entries = scan(run_dir);
    for (auto it = entries.rbegin(); it != entries.rend() && !vanished; ++it) {
      if (!it->name.committed) {
        passed_over.push_back("ignored " + incomplete(*it).error);
        continue;
      }
      auto pin = CheckpointPin::take(it->path);
      VerifyResult v = !pin     ? VerifyResult{}
                       : verify ? verify(it->path)
                                : verify_checkpoint(it->path, VerifyLevel::kChecksums);
      if (v.ok) {
        if (report) report->insert(report->end(), passed_over.begin(), passed_over.end());
        CheckpointInfo info = describe(*it, std::move(v));
        info.pin = std::make_shared<const CheckpointPin>(std::move(*pin));
        return info;
      }
      // Gone between the listing and now (or, where pins cannot keep retention away, while it
      // was read). The last look goes on to older ones instead of starting over.
      if (!pin || v.gone) {
        vanished = !last_look;
        if (last_look) {
          passed_over.push_back("skipped " + it->path +
                                ": removed while being read (the run saves faster than this "
                                "reads, " +
                                std::to_string(kLooks) + " times)");
        }
        continue;
      }
      passed_over.push_back("skipped " + it->path + ": " + v.error);
    }
    if (!vanished) break;
  }
  if (report) report->insert(report->end(), passed_over.begin(), passed_over.end());
  return std::nullopt;
}

}  // namespace rm

#include "checkpoint/checkpoint_writer.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/io_progress.h"
#include "checkpoint/json_guard.h"
#include "checkpoint/manifest_checks.h"
#include "checkpoint/xxh_state.h"
#include "io/atomic_file.h"
#include "io/file_system.h"
#include "io/io_error.h"
#include "io/posix_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint files store floats little-endian, as they are in memory here");

namespace rm {
namespace {

// Large enough that write(2) overhead vanishes (4096 calls per GiB), small enough that a chunk
// hashed just before it is written is still in the L2 cache (1 MiB here) when write(2) copies
// it into the page cache.
constexpr size_t kChunkBytes = size_t{256} << 10;
// Slots, not a locked list: a save's thread reads them at every phase while the training thread
// may install a trace's hook.
std::atomic<CheckpointPhaseHook> g_phase_hooks[4] = {};

// Reads the shard at `path` back, once fsynced, and checks every piece's XXH64 against what was
// written (info): the verification of "a checkpoint is done when it is verified", made by each
// writer of its own shard, all at once, before its descriptor says the shard is durable. Rank 0
// used to read every rank's shard again at each commit -- alone, while the others waited for it
// at their next collective: the whole checkpoint's bytes per save, on one process.
// What it checks is what the file system returns: from the page cache where it still holds the
// pages (as rank 0's read was on one node), from the disk or the file server where it does not.
// A resume verifies every byte again, from the storage.
void read_back(const std::string& path, const ShardFileInfo& info) {
  io::Fd fd = io::open_read(path);
  std::vector<char> chunk(kChunkBytes);  // hashed while in the L2 cache
  for (const PieceInfo& p : info.pieces) {
    XxhState h;
    for (uint64_t at = p.offset, left = p.bytes; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
      io::pread_exact(fd.get(), chunk.data(), n, at, path);
      note_io_progress();
      XXH64_update(h.s, chunk.data(), n);
      at += n;
      left -= n;
    }
    const uint64_t got = XXH64_digest(h.s);
    if (got != p.xxh64) {
      // An I/O failure (EIO's kind), not bad input: checkpoint.on_error: continue goes on, and
      // the save is abandoned (its scratch removed, the others told) as for a failed write.
      throw IoError(path + ": read back after its fsync, piece " + p.buffer + "[" +
                        std::to_string(p.begin) + "," + std::to_string(p.end) + ") hashes to " +
                        hex64(got) + ", written as " + hex64(p.xxh64) +
                        " (the storage did not keep what was written)",
                    EIO);
    }
  }
}

}  // namespace

void add_checkpoint_phase_hook(CheckpointPhaseHook hook) {
  for (auto& slot : g_phase_hooks) {
    if (slot.load() == hook) return;
  }
  for (auto& slot : g_phase_hooks) {
    CheckpointPhaseHook empty = nullptr;
    if (slot.compare_exchange_strong(empty, hook)) return;
  }
  throw std::logic_error("add_checkpoint_phase_hook: more than 4 hooks");
}

void remove_checkpoint_phase_hook(CheckpointPhaseHook hook) {
  for (auto& slot : g_phase_hooks) {
    CheckpointPhaseHook expected = hook;
    slot.compare_exchange_strong(expected, nullptr);
  }
}

void checkpoint_phase(const char* phase) {
  set_io_activity(phase);
  note_io_progress();
  io::fs().note(phase);
  for (auto& slot : g_phase_hooks) {
    if (CheckpointPhaseHook hook = slot.load()) hook(phase);
  }
}

std::string prepare_checkpoint_dir(const std::string& run_dir, int64_t step) {
  if (step < 0 || step > kMaxStep) {
    throw CheckpointError(run_dir + ": checkpoint step " + std::to_string(step) + " out of range");
  }
  // checkpoints/ (and the run directory) must be durable entries before anything committed
  // inside them can be: a power cut forgets a directory whose parent was never fsynced.
  io::fs().note("shard:prepare");  // for the fault layer's journal only (not a phase event)
  io::make_dirs_durable(checkpoints_root(run_dir));
  const std::string tmp = checkpoint_tmp_path(run_dir, step);
  io::make_dir(tmp);
  return tmp;
}

ShardFileInfo write_shard(const std::string& tmp_dir, int64_t step, int rank,
                          const std::vector<ShardSlice>& slices) {
  ShardFileInfo info;
  info.name = shard_file_name(rank);
  info.rank = rank;
  const std::string path = io::join(tmp_dir, info.name);
  // Lay the file out and check it before writing a byte.
  for (const ShardSlice& s : slices) {
    if (s.end < s.begin || (s.end > s.begin && s.data == nullptr)) {
      throw CheckpointError(path + ": slice of '" + s.buffer + "' [" + std::to_string(s.begin) +
                            "," + std::to_string(s.end) + ") is empty-but-reversed or has no data");
    }
    PieceInfo p;
    p.buffer = s.buffer;
    p.begin = s.begin;
    p.end = s.end;
    p.offset = info.size;
    p.bytes = (s.end - s.begin) * sizeof(float);
    info.size += p.bytes;
    info.pieces.push_back(std::move(p));
  }
  validate_file_entry(info, kMaxWorldSize, path, "shard");

  // A descriptor left from an earlier attempt must not outlive the shard it described. Nor may a
  // failure marker: a late failing save of this step (after the committing rank had cleaned up)
  // leaves one, and this save of the same step again (a NaN rollback's replay) would be failed by
  // it, blaming this rank.
  const std::string descriptor = io::join(tmp_dir, shard_descriptor_name(rank));
  io::unlink_file(descriptor);
  io::unlink_file(io::join(tmp_dir, shard_failure_name(rank)));

  checkpoint_phase("shard:write");
  io::Fd fd = io::open_write_truncate(path);
  for (size_t i = 0; i < slices.size(); ++i) {
    XxhState h;
    const char* p = reinterpret_cast<const char*>(slices[i].data);
    for (uint64_t left = info.pieces[i].bytes; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunkBytes));
      XXH64_update(h.s, p, n);
      io::write_all(fd.get(), p, n, path);
      note_io_progress();
      p += n;
      left -= n;
    }
    info.pieces[i].xxh64 = XXH64_digest(h.s);
  }
  checkpoint_phase("shard:fsync");
  io::fsync_fd(fd.get(), path);
  fd.close_checked(path);
  checkpoint_phase("shard:verify");
  read_back(path, info);

  // The descriptor need not be durable, only visible and whole: it exists to tell rank 0 that
  // the shard is durable, and commit_checkpoint fsyncs the directory (every entry in it) before
  // the rename. Skipping its fsyncs saves two per rank.
  checkpoint_phase("shard:descriptor");
  {
    const std::string text = shard_descriptor_to_json(step, info);
    write_file_atomic(descriptor, text.data(), text.size(), Durability::kVisibleOnly);
  }
  io::fs().note("shard:done");  // for the fault journal: this rank's part of the save is over
  return info;
}

std::vector<ShardFileInfo> collect_shards(const std::string& tmp_dir, int64_t step, int writers,
                                          double timeout_s) {
  if (writers < 1 || writers > kMaxWorldSize) {
    throw CheckpointError(tmp_dir + ": cannot collect shards of " + std::to_string(writers) +
                          " writers");
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(std::max(0.0, timeout_s));
  std::vector<ShardFileInfo> files(writers);
  std::vector<bool> have(writers, false);
  int missing = writers;
  set_io_activity("shard:collect (waiting for the other ranks' shards)");
  for (;;) {
    for (int r = 0; r < writers; ++r) {
      if (have[r]) continue;
      const std::string path = io::join(tmp_dir, shard_descriptor_name(r));
      if (!io::exists(path)) {
        // A rank whose save failed says so (shard_failure_name): give up now, not at timeout_s,
        // so that rank 0's next save() fails instead of waiting while the others wait for it.
        if (io::exists(io::join(tmp_dir, shard_failure_name(r)))) {
          throw IoError(tmp_dir + ": rank " + std::to_string(r) + " could not write its shard "
                        "of step " + std::to_string(step) + " (its error is in its log)");
        }
        continue;
      }
      ShardFileInfo f = parse_shard_descriptor(io::read_file(path, kMaxManifestBytes), path, step);
      if (f.rank != r || f.name != shard_file_name(r)) {
        throw CheckpointError(path + ": describes " + f.name + " of rank " +
                              std::to_string(f.rank) + ", expected rank " + std::to_string(r));
      }
      files[r] = std::move(f);
      have[r] = true;
      --missing;
      note_io_progress();  // a rank's shard is durable: the save moves on
    }
    if (missing == 0) break;
    if (Clock::now() >= deadline) {
      std::string ranks;
      for (int r = 0; r < writers; ++r) {
        if (!have[r]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      }
      throw CheckpointError(tmp_dir + ": gave up after " + std::to_string(timeout_s) +
                            " s waiting for the shards of rank(s) " + ranks +
                            " (did those ranks fail or save a different step?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return files;
}

std::string commit_checkpoint(const std::string& run_dir, int64_t step, const Manifest& manifest) {
  const std::string tmp = checkpoint_tmp_path(run_dir, step);
  const std::string final_dir = checkpoint_path(run_dir, step);
  if (manifest.step != step) {
    throw CheckpointError(tmp + ": manifest is for step " + std::to_string(manifest.step) +
                          ", committing step " + std::to_string(step));
  }
  validate_manifest(manifest, io::join(tmp, kManifestFileName));
  if (!io::is_directory(tmp)) throw CheckpointError(tmp + ": no such directory to commit");
  io::fs().note("commit:prepare");  // for the fault journal: the descriptors' removal follows

  // Cheap structural check of what the ranks wrote: every listed file present, exact size.
  // (Their checksums were computed from memory while writing and checked by their writers
  // reading them back; resume verifies them again.)
  std::set<std::string> listed;
  for (const ShardFileInfo& f : manifest.files) {
    const std::string path = io::join(tmp, f.name);
    io::Fd fd = io::open_read(path);
    const uint64_t size = io::regular_file_size(fd.get(), path);
    if (size != f.size) {
      throw CheckpointError(path + ": " + std::to_string(size) + " bytes, manifest says " +
                            std::to_string(f.size));
    }
    listed.insert(f.name);
  }
  // The descriptors (and any stray file) go; the fsync below makes the removals durable too.
  for (const std::string& name : io::list_dir(tmp)) {
    if (listed.count(name) > 0) continue;
    const std::string path = io::join(tmp, name);
    if (io::is_directory(path)) {
      io::remove_tree(path);
    } else {
      io::unlink_file(path);
    }
  }

  checkpoint_phase("commit:manifest");
  const std::string text = to_json(manifest);
  // What no reader would accept is not committed: a save that fails here says why, where a
  // committed one would be passed over as damaged at the resume that needed it.
  std::string too_large = check_json_shape(text);
  if (too_large.empty() && text.size() > kMaxManifestBytes) {
    too_large = std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(kMaxManifestBytes >> 20) + " MiB a manifest may have";
  }
  if (!too_large.empty()) {
    throw CheckpointError(io::join(tmp, kManifestFileName) + ": the manifest of " +
                          std::to_string(manifest.world_size) + " ranks and " +
                          std::to_string(manifest.tensors.size()) +
                          " tensors is beyond what a reader accepts (" + too_large +
                          "); not committed");
  }
  // Atomic within the directory too, then fsyncs step_N.tmp/: every entry in it is durable
  // before the rename can make it visible.
  write_file_atomic(io::join(tmp, kManifestFileName), text.data(), text.size());

  checkpoint_phase("commit:rename");
  const std::string root = checkpoints_root(run_dir);
  if (!io::exists(final_dir)) {
    io::rename_path(tmp, final_dir);
  } else if (io::exchange_paths(tmp, final_dir)) {
    // step_N now holds the new checkpoint, step_N.tmp the old one.
    io::fsync_directory(root);
    io::remove_tree(tmp);
  } else {
    // No RENAME_EXCHANGE here: move the old one aside first. A crash in between leaves step_N
    // missing, never a mix; the next start puts the old one back (restore_replaced_checkpoints).
    const std::string old = final_dir + kReplacedSuffix;
    io::remove_tree(old);
    io::rename_path(final_dir, old);
    io::rename_path(tmp, final_dir);
    io::fsync_directory(root);
    io::remove_tree(old);
  }
  checkpoint_phase("commit:fsync");
  io::fsync_directory(root);
  checkpoint_phase("commit:done");
  return final_dir;
}

std::vector<std::string> restore_replaced_checkpoints(const std::string& run_dir) {
  std::vector<std::string> restored;
  const std::string root = checkpoints_root(run_dir);
  if (!io::is_directory(root)) return restored;
  for (const std::string& name : io::list_dir(root)) {
    // Only a name commit_checkpoint gives, moved aside.
    const auto parsed = parse_step_dir_name(name);
    if (!parsed || parsed->suffix != kReplacedSuffix) continue;
    const std::string path = io::join(root, name);
    const std::string back = io::join(root, step_dir_name(parsed->step));
    if (io::exists(back)) continue;  // the replace went through: this is scratch
    io::rename_path(path, back);
    io::fsync_directory(root);
    std::printf(
        "ringmaster: %s: put back, moved aside by a save of its step that a crash cut "
        "short before its replacement was in place\n",
        back.c_str());
    restored.push_back(back);
  }
  return restored;
}

std::vector<std::string> remove_incomplete_checkpoints(const std::string& run_dir,
                                                       int64_t up_to_step) {
  std::vector<std::string> removed;
  const std::string root = checkpoints_root(run_dir);
  if (!io::is_directory(root)) return removed;
  // A rank still creating its files in a scratch directory (a late shard of a failed save) can
  // make its removal fail with ENOTEMPTY for a moment: tried again before it is moved aside.
  const auto remove_scratch = [](const std::string& path) {
    for (int attempt = 1;; ++attempt) {
      try {
        io::remove_tree(path);
        return;
      } catch (const IoError& e) {
        if (e.error_code() != ENOTEMPTY || attempt == 3) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  };
  const std::string kStale = "stale.";
  for (const std::string& name : io::list_dir(root)) {
    const auto parsed = parse_step_dir_name(name);
    if (name.compare(0, kStale.size(), kStale) == 0) {
      // Scratch moved aside earlier (below): nothing reads or writes it, and a disk it fills
      // stays full. Removed once it can be; until then left, as it was said to be.
      const auto moved = parse_step_dir_name(name.substr(kStale.size()));
      if (!moved || moved->committed) continue;  // not a name this code gives: someone else's
      const std::string path = io::join(root, name);
      try {
        remove_scratch(path);
        removed.push_back(path);
      } catch (const IoError&) {
      }
    } else if (parsed && !parsed->committed && parsed->step <= up_to_step) {
      // One that cannot be removed (a file in it made read-only or immutable) is moved out of
      // the way of a later save of its step, which would reuse it, to a name no save, resume
      // or retention takes ("stale." + its name), said, and left until a later call can remove
      // it: the run must not fail to start for it. If even that rename fails, the start does.
      const std::string path = io::join(root, name);
      try {
        remove_scratch(path);
        removed.push_back(path);
      } catch (const IoError& e) {
        const std::string aside = io::join(root, "stale." + name);
        if (io::exists(aside)) throw;
        io::rename_path(path, aside);
        io::fsync_directory(root);
        std::fprintf(stderr,
                     "ringmaster: warning: %s: scratch of a save or removal that did not end, "
                     "cannot be removed (%s): moved to %s, which nothing reads; removed when a "
                     "later start or save can\n",
                     path.c_str(), e.what(), aside.c_str());
      }
    } else if (io::is_symlink_scratch(name, kBestLink)) {
      // Nothing reads it; a crash left it. Only a link: a file or directory of that name is
      // someone else's.
      struct stat st;
      const std::string path = io::join(root, name);
      if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        io::unlink_file(path);
        removed.push_back(path);
      }
    }
  }
  return removed;
}

}  // namespace rm

// Pins: a reader of a checkpoint keeps a live run's retention from removing it while it reads.
//
// `eval`, `sample`, `export`, `ckpt inspect` and model.init_from (worker/initial_weights.h) of a
// run that is still training read its newest checkpoint, and with checkpoint.keep: 1 the run's
// next save makes retention (retention.h) remove exactly that one. Readers used to see it vanish
// mid-read and report it as damaged (a few reads in a hundred under frequent saves). Now:
//   - a reader takes a CheckpointPin on the checkpoint's directory before it reads it (flock
//     LOCK_SH on the directory itself) and holds it until it is done;
//   - retention removes a checkpoint only once claim_for_removal() got LOCK_EX | LOCK_NB on it,
//     and renames it away while it holds that claim. A pinned checkpoint is left for a later
//     retention (the first after its readers are done): training never waits on a reader.
//
// The race that remains is a reader opening a checkpoint just as retention renames it away: take()
// compares the directory it locked with what the path names once the lock is held, and says
// "gone" (nullopt) when they differ, or when nothing is there. The caller then looks again: the
// run has a newer checkpoint by then.
//
// Where flock does not lock directories exclusively (NFS maps flock to byte-range locks, and an
// exclusive one needs a file open for writing; file systems without locks), claims hold nothing
// and retention removes as it did; readers then fall back on telling a checkpoint that vanished
// from a damaged one (still_there) and looking again (find_resume_checkpoint,
// launcher/loaded_run.cc). Pins keep a checkpoint from retention; a --from resume removing
// the run's checkpoints past its start waits for their readers a while (at most 30 s) and then
// removes them regardless, and a save of a step that is already on disk replaces it regardless.
// flock is per open file description: a process that pins a checkpoint and then runs retention
// itself defers it too.
#pragma once

#include <optional>
#include <string>

#include "io/posix_io.h"

namespace rm {

class CheckpointPin {
 public:
  // Pins the directory at ckpt_dir. nullopt: no directory is there, or the one there is not the
  // one locked (renamed away meanwhile). A directory that cannot be opened or locked otherwise
  // (permissions, no lock support) gives a pin that holds nothing: the read goes on and fails,
  // or not, as it would have.
  static std::optional<CheckpointPin> take(const std::string& ckpt_dir);

  bool holds() const { return fd_.valid(); }
  // The directory pinned, its symbolic links resolved: what to read through. checkpoints/best is
  // a link that retention points elsewhere when a better checkpoint comes; read through the link,
  // a reader would take the manifest of one checkpoint and the shards of another.
  const std::string& path() const { return path_; }
  // Whether path() still names the directory pinned (false: removed or renamed away). Where the
  // pin holds nothing, whether path() is there at all.
  bool still_there() const;

 private:
  CheckpointPin(io::Fd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  io::Fd fd_;
  std::string path_;
};

// Retention's side. True: ckpt_dir may be removed now, and *claim holds it exclusively (or holds
// nothing where locks do not work, or the directory cannot be opened: the removal then reports
// its own error) until it is reset; rename the directory away before letting it go. False: a
// reader holds a pin on it.
bool claim_for_removal(const std::string& ckpt_dir, io::Fd* claim);

// RM_TEST_READ_PAUSE_MS (worker/test_hooks.h): a reader that has chosen and pinned its checkpoint
// sleeps this long before reading it, so that the reader-pin tests meet retention every time.
void set_read_pause_ms_for_tests(int ms);
void pause_before_reading_for_tests();

}  // namespace rm

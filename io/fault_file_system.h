// A FileSystem for tests that records what a power cut would lose and injects faults: the
// LevelDB FaultInjectionTestEnv idea, extended to directory entries and to several processes.
//
// Journal. Every mutating call on a path under `scope` appends a record to a journal file (one
// write(2) with O_APPEND each, so the ranks of a job can share one journal and their records
// keep the order in which they happened). Records name what a power cut at any later moment
// would undo: a file's content beyond its last fsync, and every directory entry created,
// removed or renamed since its directory's last fsync. Files about to be unlinked or replaced
// by a rename are first hard-linked into "<journal>.stash/", so the cut can bring them back.
// apply_power_cut() (power_cut.h) replays the journal onto the real disk after the processes
// are dead: the disk then holds exactly what the journal says was durable.
//
// Faults. Counted calls are the mutating ones (create, write, fsync, close, rename, exchange,
// unlink, mkdir, rmdir) on paths under `count_under`; the count starts at the first counted call
// whose path contains `start_at` (empty: at once). At call number `at` (1-based):
//   crash  the call is not made; the process SIGKILLs itself (in-process tests instead set
//          `freeze`: this call and every later one fail with EIO, as if the machine had died)
//   tear   the call is a write: half of its bytes are written, then as crash
//   fail   the call fails with `error` (EIO, ENOSPC, ...), once, or from then on if `sticky`
// `op` restricts counting to one kind of call ("write", "fsync", "rename", ...; "any": all).
// `skip_fsync` = K: the K-th counted fsync is silently not made (a removed fsync).
//
// From the environment (the ringmaster binary: worker/test_hooks.h passes it to
// install_fault_file_system):
//   RM_TEST_IO_FAULT="scope=/abs/run journal=/abs/j.log [count_under=/abs/run/checkpoints]
//                     [start_at=step_00000004] [at=N action=crash|tear|fail op=any|write|...
//                      error=EIO|ENOSPC|EACCES|... sticky=0|1 rank=R] [skip_fsync=K]"
// Every process journals, and every rank counts its own calls (each "K" record names its rank);
// only rank R (OMPI_COMM_WORLD_RANK or PMIX_RANK, default 0) triggers, and the supervising
// `ringmaster run` process (which has neither MPI's variables nor RM_RESTART_COUNT) neither
// counts nor triggers. Faults strike only the first attempt (RM_RESTART_COUNT /
// SLURM_RESTART_COUNT unset or 0), so `max_restarts` recovers from them. Paths are compared as
// written after making them absolute against the working directory; give absolute paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "io/file_system.h"
#include "io/io_error.h"

namespace rm {
namespace io {

struct FaultPlan {
  std::string scope;
  std::string journal;  // on the same file system as scope (the stash uses hard links)
  std::string count_under;  // default: scope
  std::string start_at;
  int64_t at = 0;  // 0: never trigger, only journal and count
  std::string action = "crash";  // crash | tear | fail
  std::string op = "any";
  int error = 5;  // EIO
  bool sticky = false;
  bool freeze = false;  // in-process tests: "crash" fails every call from then on instead
  // The skip_fsync-th counted fsync (1-based) is not made and not journaled, yet reports
  // success: as if the code had no such fsync. For showing which test catches its removal.
  int64_t skip_fsync = 0;
  // false: journal only, never count or trigger (the supervisor of `ringmaster run`, so that
  // call numbers are those of the rank alone).
  bool count_calls = true;
};

// Parses the RM_TEST_IO_FAULT syntax above; throws IoError naming the bad field.
FaultPlan parse_fault_plan(const std::string& text);

class FaultFileSystem : public FileSystem {
 public:
  explicit FaultFileSystem(FaultPlan plan);  // throws IoError if the journal cannot be opened
  ~FaultFileSystem() override;

  int open(const char* path, int flags, mode_t mode) override;
  ssize_t write(int fd, const void* data, size_t size) override;
  int fsync(int fd) override;
  int close(int fd) override;
  int rename(const char* from, const char* to) override;
  int exchange(const char* a, const char* b) override;
  int unlink(const char* path) override;
  int mkdir(const char* path, mode_t mode) override;
  int rmdir(const char* path) override;
  void note(const char* text) override;

  int64_t counted() const { return counted_.load(); }  // counted calls so far
  bool triggered() const { return triggered_.load(); }

 private:
  struct OpenFile {
    std::string path;
    bool in_scope = false;
    bool directory = false;
  };
  enum class Verdict { kProceed, kFail, kCrash, kTear };

  // Counts the call if it is under count_under (then *number is its number, else 0).
  Verdict count(const char* kind, const std::string& path, int64_t* number = nullptr);
  bool fail_now(Verdict v);  // handles kFail/kCrash (freeze or SIGKILL); true: return -1
  bool in_scope(const std::string& abs) const;
  void record(const std::string& line);
  std::string stash(const std::string& abs);  // hard link into the stash; "-" if none
  int64_t next_id() { return ++ids_; }

  FaultPlan plan_;
  int journal_fd_ = -1;
  std::atomic<int64_t> counted_{0}, fsyncs_{0}, ids_{0}, stashed_{0};
  std::atomic<bool> counting_, triggered_{false}, dead_{false};
  std::mutex mu_;
  std::map<int, OpenFile> files_;
};

// With `spec` (RM_TEST_IO_FAULT's value) set and non-empty, installs a FaultFileSystem for the
// life of the process and prints one line on stderr saying so; null or empty: nothing. A
// malformed value is an error (IoError; exit 2 from the caller).
void install_fault_file_system(const char* spec);

}  // namespace io
}  // namespace rm

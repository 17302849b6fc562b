// The lease half of the run lock (run_lock.h): one run per run directory even where flock(2)
// does not reach every host.
//
// flock is exact on one host and, on NFS, across hosts (the Linux client sends it to the server
// as a byte-range lock). Not everywhere: NFS mounted with local_lock=flock (or =all) and some
// FUSE and cluster file systems keep it local to each host, so a run on another host takes
// "the" lock as if it were free. So the holder also keeps a lease in the lock file: after the
// holder's line, a line "lease HOST PID N" whose N a thread increments and fdatasyncs every
// renew_s; a clean exit writes "released" instead. A would-be holder that got the flock reads
// that line (check_previous_holder):
//   - nothing, or "released": the last holder exited cleanly; take it;
//   - this host: flock is exact here, so the holder has died (killed, crashed); take it over,
//     saying so;
//   - another host: watch N for lease_s. If it moves, the holder lives and flock did not see
//     it: the caller refuses (or waits). If not, its node died: take it over, saying so.
//
// What this relies on, and says: a write the holder has fdatasynced is seen by a reader on
// another host that opens the file afterwards (NFS close-to-open consistency; any local or
// cluster file system); the holder's renewal thread runs at least once per lease_s (a holder
// stopped longer -- SIGSTOP, a swap storm -- can be taken over); hostnames are unique. No clocks
// are compared, only whether N changes, so clock skew between hosts does not matter.
#pragma once

#include <cstdint>
#include <string>

namespace rm {

// The lease line of a lock file.
struct Lease {
  enum class State { kNone, kReleased, kHeld } state = State::kNone;
  std::string host;
  long pid = 0;
  uint64_t n = 0;
};

// Reads the lease of the lock file at `path`, opening it afresh (so that NFS revalidates it). A
// missing, empty or unparsable line is kNone.
Lease read_lease(const std::string& path);

// The lock file's text: the holder's line ("pid P on host H since T ...") and the lease line.
std::string lock_file_text(const std::string& holder, const Lease& lease);

// What check_previous_holder found.
struct PreviousHolder {
  bool live = false;    // held by a live process on another host: refuse (or wait)
  std::string message;  // when taking over from a dead holder: one line saying whose lock
  std::string holder;   // the holder's line, for messages
};

// Called with the flock held. Returns at once unless the lease names another host and is not
// released; then watches its counter for up to lease_s seconds (polling every lease_s / 20).
PreviousHolder check_previous_holder(const std::string& path, const std::string& my_host,
                                     double lease_s);

// Starts renewing this process's lease in the lock file open as `fd` (never closed): writes
// lock_file_text(holder, {kHeld, host, pid, n}) now and every renew_s with n + 1, and
// "released" at a normal exit (atexit). Once per process.
void hold_lease(int fd, const std::string& holder, const std::string& host, double renew_s);

// RM_RUN_LOCK_LEASE_S (tests), else 30 s; renewal every lease / 6.
double run_lock_lease_s();

}  // namespace rm

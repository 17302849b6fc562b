// A rank's training state kept in host shared memory (/dev/shm), so that a process that dies
// resumes from its last step instead of the last disk checkpoint: the building block of
// in-memory checkpoints (checkpoint.memory_every). The segment outlives the process, not the
// host; a copy on another host (a replica) is the same segment kept by a partner.
//
// One segment per (run, rank), named by the caller. It holds a header page and two slots of a
// fixed capacity. A save writes the slot that does not hold the newest good state, in this order:
//   1. the slot's state is set to "being written" (so a reader never takes it from here on),
//   2. the bytes are copied in, hashed (XXH3-64) chunk by chunk from the segment as they land,
//   3. step, size, checksum and an epoch one above the other slot's are stored,
//   4. the state is set to "committed" with a release store.
// A process killed at any point leaves the other slot as it was, committed and verifiable, so
// there is always a slot to restore from once one save has completed. No fsync: shared memory
// does not survive the host, and the kernel keeps every store a killed process made.
//
// Reading trusts nothing: the header's magic, version, owner and capacity, each committed
// slot's size, and its checksum over the bytes as they are now. A segment of another owner
// (another job, or another rank count or layout: the caller's identity) is never read; a slot
// that fails its checksum is never used, and restore() says which slot it skipped and why.
//
// A segment records its home: the directory of the run it belongs to. A run that crashed and is
// never run again would leave its segments until the host reboots; once its home is gone they
// are orphans, which remove_orphans() removes (every rank start sweeps its host).
//
// Not thread-safe: one thread saves into a segment at a time; readers run after the writer has
// gone (another process, or a restart).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rm {

// A piece of the state, copied in (save) or out (restore) in order.
struct SnapshotPart {
  void* data;  // save reads it; restore writes it
  size_t bytes;
};

class MemorySnapshot {
 public:
  // Opens the segment `name` (a shm_open name: "/" then no other '/'), creating it, or
  // recreating it when the one there belongs to another owner or has another capacity (whose
  // content is then never read). Throws IoError naming the segment when it cannot be made, or
  // when /dev/shm has too little room (named in the message, with the bytes needed).
  // home: an absolute directory whose removal makes the segment an orphan; "" (or a path over
  // kMaxHomeBytes): none, the segment is never removed as an orphan.
  static MemorySnapshot create(const std::string& name, uint64_t owner, size_t capacity,
                               const std::string& home = "");
  // Opens an existing segment to read; nullopt when there is none or it cannot be used, with
  // the reason in *why ("no segment", "another job's segment (owner ...)", ...).
  static std::optional<MemorySnapshot> open(const std::string& name, uint64_t owner,
                                            size_t capacity, std::string* why);
  // Removes the segment (no error if there is none).
  static void remove(const std::string& name);
  // Removes the segments in /dev/shm whose names start with `prefix` (a shm_open name's start,
  // "/ringmaster-"), made by this version, whose home is gone: the home's parent directory is
  // there and the home is not (so a file system not mounted yet orphans nothing). Returns
  // "<name> (<home>)" for each one removed. Segments it cannot read are left alone.
  static std::vector<std::string> remove_orphans(const std::string& prefix);
  // Removes this host's segments whose name starts with `prefix` and whose header records the
  // directory `home` (absolute, as written), whatever rank layout wrote them; returns their names.
  static std::vector<std::string> remove_homed(const std::string& prefix, const std::string& home);
  static constexpr size_t kMaxHomeBytes = 3072;

  MemorySnapshot(MemorySnapshot&& other) noexcept;
  MemorySnapshot& operator=(MemorySnapshot&& other) noexcept;
  MemorySnapshot(const MemorySnapshot&) = delete;
  MemorySnapshot& operator=(const MemorySnapshot&) = delete;
  ~MemorySnapshot();

  const std::string& name() const { return name_; }
  size_t capacity() const { return capacity_; }

  // Saves `parts` (together at most capacity() bytes, else std::invalid_argument before
  // anything is written) as the state after `step`, into the slot that does not hold the newest
  // state known good: this process's last save or restore, else the newest slot that verifies
  // now (a slot damaged since its save is written over, never the good one beside it).
  void save(int64_t step, const std::vector<SnapshotPart>& parts);

  // What a slot holds, verified or not.
  struct SlotReport {
    int slot = 0;
    int64_t step = -1;
    bool usable = false;
    std::string why;  // when not usable: "never written", "being written", "being received",
                      // "checksum mismatch"
  };
  // Both slots, newest commit first, each verified against its checksum (reads every byte).
  std::vector<SlotReport> verify() const;
  // The verified steps, newest first (0, 1 or 2 of them).
  std::vector<int64_t> verified_steps() const;
  // Copies the state saved after `step` into `parts` (whose sizes must add up to the slot's),
  // verifying the checksum over the bytes as they are read; false, with the reason in *why, when
  // no slot holds that step verified or the sizes differ (parts may then hold partial bytes).
  bool restore(int64_t step, const std::vector<SnapshotPart>& parts, std::string* why) const;

  // Replicas: a committed slot's bytes sent to another host as they are, with their record, and
  // kept there in a segment of the same layout.
  struct SlotCopy {
    const char* data = nullptr;
    size_t bytes = 0;
    int64_t step = -1;
    uint64_t checksum = 0;  // XXH3-64
  };
  // The slot this process's last save committed (nullopt before one). Valid until the next save.
  std::optional<SlotCopy> last_saved() const;
  // The slot holding `step`, verified now (reads every byte); nullopt when none does.
  std::optional<SlotCopy> verified_slot(int64_t step) const;
  // Receiving a slot: begin_receive() marks the slot a save would write "being received" and
  // returns where its `bytes` (<= capacity, else std::invalid_argument) go; commit_received()
  // stores the sender's step, size and checksum and commits it, without hashing: whoever reads
  // it verifies every byte against the sender's checksum, so damage in transit or since is
  // caught then, and the slot skipped.
  char* begin_receive(size_t bytes);
  void commit_received(int64_t step, size_t bytes, uint64_t checksum);

 private:
  MemorySnapshot(std::string name, void* base, size_t mapped, size_t capacity);
  char* slot_data(int slot) const;
  // A write's two ends: the slot to write, marked "being written"; its record, committed.
  int begin_write(size_t bytes);
  void commit(int slot, int64_t step, size_t bytes, uint64_t checksum);

  std::string name_;
  void* base_ = nullptr;
  size_t mapped_ = 0;
  size_t capacity_ = 0;
  // The slot a save must not overwrite: the newest state known good (this process's last save,
  // restore or verify); -1: not known yet, so the next save verifies first.
  mutable int keep_slot_ = -1;
  int receiving_slot_ = -1;  // between begin_receive and commit_received
};

// The segment name of a run's rank: "/ringmaster-<16 hex digits of run_key>-r<rank>".
std::string memory_snapshot_name(uint64_t run_key, int rank);

}  // namespace rm

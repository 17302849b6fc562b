// What a GPU would be running beside its compute stream, as far as the host can know: the
// collectives in flight and the checkpoint downloads not yet fenced, each with its byte ranges.
// OrderCheckingCompute and OrderCheckingCommunicator report to one ledger, which checks every
// memory access of a compute call against them and records each conflict as a violation (a
// sentence naming the call, the range and the conflicting operation) instead of aborting, so
// that a test can list them all.
//
// The rules it enforces are the contract of kernels/compute.h and collectives/communicator.h on
// the cuda/nccl path:
//  - A collective is ordered after the compute calls made before it was issued and runs beside
//    those made after, until the host observes its completion (Work::test() true, Work::wait()
//    returned, a barrier). Any compute access to its buffer in that window is a race -- a read
//    too, since the values change under it. So is another collective on the same bytes (the
//    mpi backend's MPI path completes operations in any order).
//  - A download_async copies its source on a side stream after the compute calls made before
//    it, and is done only when a fence taken after it has run. Until then a compute write to
//    the source, or any compute access to the host destination, is a race, and
//    so is a collective issued on the source. The copy itself happens here only when the fence
//    runs, from the source as it is then: the side stream at its latest, so that a reader who
//    skips the fence sees stale bytes, and one whose source changed sees that in the data.
//
// Thread safety: every method may be called from any thread (a checkpoint writer's thread runs
// the fences); the ledger holds a mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace rm {

class OrderLedger {
 public:
  enum class Access { kRead, kWrite };

  // Names `bytes` at `base` for messages ("comm.allocate#2+256"). Unnamed memory is printed as
  // an address.
  void name_memory(const void* base, size_t bytes, const std::string& name);
  void forget_memory(const void* base);

  // A compute call's access to memory of the Compute (device) or to host memory (the host side
  // of upload / download).
  void device_access(const char* call, const void* p, size_t bytes, Access access);
  void host_access(const char* call, const void* p, size_t bytes, Access access);
  // A block (named, or else its first byte) about to be freed: no collective may still use it.
  // (Downloads need no check: cuda's releases wait for them; the caller fences first.)
  void release(const char* call, const void* base);

  // A collective on [buf, buf + bytes), from issue until the host observes its completion.
  // `what` names it ("all_reduce(seq=3)"). Returns the id to end it with.
  uint64_t begin_collective(const std::string& what, const void* buf, size_t bytes);
  void end_collective(uint64_t id);
  void end_all_collectives();  // a barrier: every earlier operation has completed
  size_t collectives_in_flight() const;

  // A deferred download; returns its id (1, 2, ...).
  uint64_t add_download(void* host_dst, const void* src, size_t bytes);
  // Makes every download with id <= last_id (all of them: UINT64_MAX) happen: copies its
  // source as it is now into its destination and forgets it.
  void fence_downloads(uint64_t last_id);
  uint64_t last_download_id() const;

  std::vector<std::string> violations() const;
  void clear_violations();

  // How many device accesses were checked while some collective was in flight, or some download
  // unfenced (conflicting or not): evidence that a test exercised those windows at all.
  struct Exposure {
    size_t beside_collectives = 0, beside_downloads = 0;
  };
  Exposure exposure() const;

 private:
  struct Span {
    const char* p;
    size_t bytes;
    bool overlaps(const void* q, size_t n) const;
  };
  struct Named {
    Span span;
    std::string name;
  };
  struct Collective {
    uint64_t id;
    std::string what;
    Span buf;
  };
  struct Download {
    uint64_t id;
    Span dst, src;
  };

  std::string describe(const void* p, size_t bytes) const;  // mutex held
  void violation(const std::string& what);                  // mutex held

  mutable std::mutex mutex_;
  std::vector<Named> names_;
  std::vector<Collective> collectives_;
  std::vector<Download> downloads_;
  uint64_t next_collective_ = 0, next_download_ = 0;
  std::vector<std::string> violations_;
  Exposure exposure_;
};

}  // namespace rm

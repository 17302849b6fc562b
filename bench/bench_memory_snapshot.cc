#include "bench/bench_memory_snapshot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "base/elapsed.h"
#include "checkpoint/memory_snapshot.h"
#include "io/io_error.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kPage = 4096;

// A shard's bytes: its slices of params, adam_m and adam_v (shard_floats counts all three).
uint64_t shard_bytes(const BenchState& state, int rank, int ranks) {
  return state.shard_floats(rank, ranks) * sizeof(float);
}

// A plain shared-memory mapping, unlinked at once (the mapping keeps it), pages reserved and
// touched. posix_fallocate, not ftruncate: a sparse file would crash with SIGBUS in the memset
// when tmpfs runs out, leaving the snapshot segments and the scratch directory behind.
class PlainShm {
 public:
  explicit PlainShm(size_t bytes) : bytes_(std::max<size_t>(bytes, 1)) {
    const std::string name = "/ringmaster-bench-" + std::to_string(getpid());
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) throw IoError("/dev/shm" + name + ": shm_open failed: " + std::strerror(errno));
    shm_unlink(name.c_str());
    if (const int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes_)); e != 0) {
      close(fd);
      throw IoError("/dev/shm" + name + ": reserving " + std::to_string(bytes_) +
                    " bytes failed: " + std::strerror(e));
    }
    p_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p_ == MAP_FAILED) throw IoError("/dev/shm" + name + ": mmap failed");
    std::memset(p_, 1, bytes_);
  }
  ~PlainShm() { munmap(p_, bytes_); }
  char* data() const { return static_cast<char*>(p_); }

 private:
  size_t bytes_;
  void* p_ = nullptr;
};

// The segments of one benchmark run, removed on the way out.
class Segments {
 public:
  ~Segments() {
    for (const std::string& n : names_) MemorySnapshot::remove(n);
  }
  MemorySnapshot make(int rank, size_t capacity) {
    const std::string name = memory_snapshot_name(0xBE4C000000000000ull ^ getpid(), rank);
    names_.push_back(name);
    return MemorySnapshot::create(name, /*owner=*/1, capacity);
  }

 private:
  std::vector<std::string> names_;
};

std::vector<SnapshotPart> parts_of(const std::vector<ShardSlice>& slices) {
  std::vector<SnapshotPart> parts;
  for (const ShardSlice& s : slices) {
    parts.push_back({const_cast<float*>(s.data), (s.end - s.begin) * sizeof(float)});
  }
  return parts;
}

}  // namespace

MemorySnapshotTimes bench_memory_snapshot(BenchState& state, int ranks) {
  MemorySnapshotTimes t;
  Segments segments;
  std::vector<MemorySnapshot> snaps;
  std::vector<std::vector<SnapshotPart>> parts;
  size_t largest = 0;
  for (int r = 0; r < ranks; ++r) {
    parts.push_back(parts_of(state.slices(r, ranks)));
    const size_t bytes = shard_bytes(state, r, ranks);
    largest = std::max(largest, bytes);
    snaps.push_back(segments.make(r, bytes));
    snaps.back().save(1, parts.back());  // both slots touched: the timed save finds its pages
    snaps.back().save(2, parts.back());
  }
  PlainShm plain(largest);

  auto t0 = Clock::now();
  for (int r = 0; r < ranks; ++r) {
    char* dst = plain.data();
    for (const SnapshotPart& p : parts[r]) {
      std::memcpy(dst, p.data, p.bytes);
      dst += p.bytes;
    }
  }
  t.memcpy_in = seconds_since(t0);
  t0 = Clock::now();
  for (int r = 0; r < ranks; ++r) snaps[r].save(3, parts[r]);
  t.save = seconds_since(t0);
  std::vector<char> sink(largest, 1);  // touched: the copy-out's destination
  t0 = Clock::now();
  for (int r = 0; r < ranks; ++r) {
    size_t bytes = 0;
    for (const SnapshotPart& p : parts[r]) bytes += p.bytes;
    std::memcpy(sink.data(), plain.data(), bytes);
  }
  t.memcpy_out = seconds_since(t0);
  state.scramble();  // the restore must refill every element
  t0 = Clock::now();
  for (int r = 0; r < ranks; ++r) {
    std::string why;
    if (!snaps[r].restore(3, parts[r], &why)) {
      throw IoError(snaps[r].name() + ": restore of the benchmark's state failed: " + why);
    }
  }
  t.restore = seconds_since(t0);
  state.check("memory snapshot restore");
  return t;
}

uint64_t memory_snapshot_bench_bytes(const BenchState& state, int ranks) {
  const auto pages = [](uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; };
  uint64_t total = 0, largest = 0;
  for (int r = 0; r < ranks; ++r) {
    const uint64_t bytes = shard_bytes(state, r, ranks);
    total += kPage + 2 * pages(bytes);  // header page and two slots (checkpoint/memory_snapshot)
    largest = std::max(largest, bytes);
  }
  return total + pages(largest);
}

}  // namespace rm

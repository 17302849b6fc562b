#include "checkpoint/memory_snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxh_x86dispatch.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include "checkpoint/io_progress.h"
#include "io/io_error.h"

namespace rm {
namespace {

constexpr char kSnapshotMagic[8] = {'R', 'M', 'M', 'E', 'M', 'C', 'K', '1'};
constexpr uint32_t kVersion = 3;  // 3: the home recorded; 2: XXH3 checksums (1: XXH64)
constexpr size_t kPage = 4096;
constexpr size_t kChunk = size_t{1} << 20;  // copied, then hashed while still in cache

// A streaming XXH3-64 state. XXH3 rather than the disk format's XXH64: the library's x86
// dispatch runs it with the widest vectors the CPU has, and a save hashes every byte it copies
// (a 87 MB slice on a Zen 5 core: copy alone 6 ms, with XXH64 10.4 ms, with XXH3 7.2 ms).
struct Xxh3State {
  XXH3_state_t* s = XXH3_createState();
  Xxh3State() {
    if (s == nullptr) throw std::bad_alloc();
    XXH3_64bits_reset(s);
  }
  ~Xxh3State() { XXH3_freeState(s); }
  Xxh3State(const Xxh3State&) = delete;
  Xxh3State& operator=(const Xxh3State&) = delete;
};

// kReceiving: a replica's slot while its bytes arrive from the sender (begin_receive).
enum SlotState : uint64_t { kEmpty = 0, kWriting = 1, kCommitted = 2, kReceiving = 3 };

struct SlotHeader {
  uint64_t state;  // SlotState; read with acquire, written with release
  uint64_t epoch;  // commits so far, this one included: the newer slot has the larger
  int64_t step;
  uint64_t bytes;
  uint64_t checksum;  // XXH3-64 of the slot's bytes
};

struct SegmentHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t owner;
  uint64_t capacity;
  SlotHeader slots[2];
  uint64_t home_bytes;  // 0: no home
  char home[MemorySnapshot::kMaxHomeBytes];
};
static_assert(sizeof(SegmentHeader) <= kPage, "the header fits its page");

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t slot_stride(size_t capacity) { return round_up(std::max<size_t>(capacity, 1), kPage); }
size_t segment_bytes(size_t capacity) { return kPage + 2 * slot_stride(capacity); }

SegmentHeader* header_of(void* base) { return static_cast<SegmentHeader*>(base); }

uint64_t load_state(const SlotHeader& s) { return __atomic_load_n(&s.state, __ATOMIC_ACQUIRE); }
void store_state(SlotHeader& s, uint64_t v) { __atomic_store_n(&s.state, v, __ATOMIC_RELEASE); }

std::string errno_text(int e) { return std::strerror(e); }

[[noreturn]] void fail(const std::string& name, const std::string& what, int e) {
  throw IoError("/dev/shm" + name + ": " + what + ": " + errno_text(e), e);
}

void* map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    fail(name, "mmap of " + std::to_string(bytes) + " bytes failed", e);
  }
  close(fd);
  return p;
}

// An existing segment: opened without blocking and kept only if it is a regular file. Anyone
// on the host may make a FIFO in /dev/shm whose name starts as ours, and a plain open() of a
// FIFO waits for a writer for ever -- in the sweep every rank's start runs. -1 with errno set
// where it cannot be opened, and with EINVAL where it is not a regular file.
int open_existing_segment(const std::string& name, int flags) {
  // glibc passes the flags to open() (adding O_NOFOLLOW and O_CLOEXEC).
  const int fd = shm_open(name.c_str(), flags | O_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct stat st {};
  const int e = fstat(fd, &st) != 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
  if (e != 0) {
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void check_name(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    throw std::invalid_argument("memory snapshot: '" + name +
                                "' is not a shared-memory name ('/' then no other '/')");
  }
}

// Copies `parts` into the segment at `segment` (a save) or out of it (a restore), in chunks,
// hashing each chunk on the segment's side while it is in cache: after it lands, or before it
// leaves, so the checksum is always of the segment's bytes.
void copy_hashed(const std::vector<SnapshotPart>& parts, char* segment, bool into_segment,
                 XXH3_state_t* xxh) {
  for (const SnapshotPart& p : parts) {
    char* const mine = static_cast<char*>(p.data);
    for (size_t done = 0; done < p.bytes;) {
      const size_t n = std::min(kChunk, p.bytes - done);
      if (into_segment) {
        std::memcpy(segment, mine + done, n);
        XXH3_64bits_update_dispatch(xxh, segment, n);
      } else {
        XXH3_64bits_update_dispatch(xxh, segment, n);
        std::memcpy(mine + done, segment, n);
      }
      segment += n;
      done += n;
      note_io_progress();  // a watchdog sees a long copy move
    }
  }
}

}  // namespace

std::string memory_snapshot_name(uint64_t run_key, int rank) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/ringmaster-%016" PRIx64 "-r%d", run_key, rank);
  return buf;
}

MemorySnapshot::MemorySnapshot(std::string name, void* base, size_t mapped, size_t capacity)
    : name_(std::move(name)), base_(base), mapped_(mapped), capacity_(capacity) {}

MemorySnapshot::MemorySnapshot(MemorySnapshot&& o) noexcept { *this = std::move(o); }

MemorySnapshot& MemorySnapshot::operator=(MemorySnapshot&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) munmap(base_, mapped_);
    name_ = std::move(o.name_);
    base_ = std::exchange(o.base_, nullptr);
    mapped_ = std::exchange(o.mapped_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
    keep_slot_ = std::exchange(o.keep_slot_, -1);
  }
  return *this;
}

MemorySnapshot::~MemorySnapshot() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

char* MemorySnapshot::slot_data(int slot) const {
  return static_cast<char*>(base_) + kPage + static_cast<size_t>(slot) * slot_stride(capacity_);
}

MemorySnapshot MemorySnapshot::create(const std::string& name, uint64_t owner, size_t capacity,
                                      const std::string& home) {
  check_name(name);
  std::string why;
  if (std::optional<MemorySnapshot> same = open(name, owner, capacity, &why)) {
    return std::move(*same);  // this run's own segment: its committed slots stay readable
  }
  // Another owner's, another capacity, damaged, or none: made anew, its content never read.
  shm_unlink(name.c_str());
  const size_t bytes = segment_bytes(capacity);
  struct statvfs fs{};
  if (statvfs("/dev/shm", &fs) == 0) {
    const unsigned long long avail = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
    if (avail < bytes) {
      throw IoError("/dev/shm" + name + ": needs " + std::to_string(bytes) +
                    " bytes of shared memory and /dev/shm has " + std::to_string(avail) +
                    " free (make it larger, e.g. docker --shm-size, or set "
                    "checkpoint.memory_every: 0)",
                    ENOSPC);
    }
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) fail(name, "shm_open failed", errno);
  // posix_fallocate, not ftruncate: a sparse segment would fail later, with SIGBUS in a copy,
  // when tmpfs runs out; this fails now, with a message.
  if (const int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0) {
    close(fd);
    shm_unlink(name.c_str());
    fail(name, "reserving " + std::to_string(bytes) + " bytes failed", e);
  }
  void* base = nullptr;
  try {
    base = map_fd(fd, bytes, name);
  } catch (...) {
    // Not ours yet (no magic): no sweep would ever remove it, and it holds `bytes` of RAM.
    shm_unlink(name.c_str());
    throw;
  }
  SegmentHeader* h = header_of(base);
  std::memset(h, 0, sizeof *h);
  h->version = kVersion;
  h->header_bytes = static_cast<uint32_t>(kPage);
  h->owner = owner;
  h->capacity = capacity;
  if (!home.empty() && home.size() <= kMaxHomeBytes && home[0] == '/') {
    std::memcpy(h->home, home.data(), home.size());
    h->home_bytes = home.size();
  }
  std::memcpy(h->magic, kSnapshotMagic, sizeof kSnapshotMagic);  // last: a half-made header is not ours
  return MemorySnapshot(name, base, bytes, capacity);
}

std::optional<MemorySnapshot> MemorySnapshot::open(const std::string& name, uint64_t owner,
                                                   size_t capacity, std::string* why) {
  check_name(name);
  const auto refuse = [&](const std::string& reason) -> std::optional<MemorySnapshot> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  const int fd = open_existing_segment(name, O_RDWR);
  if (fd < 0) {
    if (errno == ENOENT) return refuse("no segment");
    if (errno == EINVAL) return refuse("not a regular file");
    return refuse("cannot open it: " + errno_text(errno));
  }
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return refuse("cannot stat it: " + errno_text(e));
  }
  const size_t bytes = segment_bytes(capacity);
  if (static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return refuse("its size is " + std::to_string(st.st_size) + " bytes, not the " +
                  std::to_string(bytes) + " of this run's state");
  }
  void* base = map_fd(fd, bytes, name);
  MemorySnapshot snap(name, base, bytes, capacity);
  const SegmentHeader* h = header_of(base);
  if (std::memcmp(h->magic, kSnapshotMagic, sizeof kSnapshotMagic) != 0 || h->version != kVersion ||
      h->header_bytes != kPage) {
    return refuse("not a segment of this version of ringmaster");
  }
  if (h->owner != owner) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "another run's segment (owner %016" PRIx64 ", this run %016"
                  PRIx64 ")", h->owner, owner);
    return refuse(buf);
  }
  if (h->capacity != capacity) {
    return refuse("it holds " + std::to_string(h->capacity) + " bytes a slot, not " +
                  std::to_string(capacity));
  }
  return snap;
}

void MemorySnapshot::remove(const std::string& name) {
  check_name(name);
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) fail(name, "shm_unlink failed", errno);
}

namespace {

// The home recorded in the segment `name` when it is one of this version's; "" otherwise.
std::string home_of(const std::string& name) {
  const int fd = open_existing_segment(name, O_RDONLY);
  if (fd < 0) return "";
  SegmentHeader h{};
  const ssize_t n = pread(fd, &h, sizeof h, 0);
  close(fd);
  if (n != static_cast<ssize_t>(sizeof h) ||
      std::memcmp(h.magic, kSnapshotMagic, sizeof kSnapshotMagic) != 0 || h.version != kVersion ||
      h.header_bytes != kPage || h.home_bytes == 0 || h.home_bytes > sizeof h.home ||
      h.home[0] != '/') {
    return "";
  }
  return std::string(h.home, h.home_bytes);
}

// The shm_open names ("/NAME") in /dev/shm that start with `prefix`.
std::vector<std::string> segments_named(const std::string& prefix) {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (const dirent* e = readdir(dir)) {
    const std::string name = std::string("/") + e->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(name);
  }
  closedir(dir);
  return names;
}

bool is_directory(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::vector<std::string> MemorySnapshot::remove_orphans(const std::string& prefix) {
  std::vector<std::string> removed;
  for (const std::string& name : segments_named(prefix)) {
    std::string home = home_of(name);
    while (home.size() > 1 && home.back() == '/') home.pop_back();
    if (home.size() < 2) continue;
    const std::string parent = home.substr(0, std::max<size_t>(home.rfind('/'), 1));
    struct stat st{};
    if (stat(home.c_str(), &st) == 0 || errno != ENOENT || !is_directory(parent)) continue;
    if (shm_unlink(name.c_str()) == 0) removed.push_back(name + " (" + home + ")");
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::vector<std::string> MemorySnapshot::remove_homed(const std::string& prefix,
                                                      const std::string& home) {
  std::vector<std::string> removed;
  for (const std::string& name : segments_named(prefix)) {
    if (home_of(name) == home && shm_unlink(name.c_str()) == 0) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

int MemorySnapshot::begin_write(size_t bytes) {
  if (bytes > capacity_) {
    throw std::invalid_argument("memory snapshot " + name_ + ": " + std::to_string(bytes) +
                                " bytes do not fit a slot of " + std::to_string(capacity_));
  }
  // The slot to write: not the one holding the newest verified state. Not simply the older
  // commit: if the newest commit was damaged since, that would overwrite the only good one.
  // Known after this process's own save or restore; otherwise verified once, here.
  if (keep_slot_ < 0) {
    const std::vector<SlotReport> slots = verify();
    for (const SlotReport& r : slots) {
      if (r.usable) {
        keep_slot_ = r.slot;
        break;
      }
    }
  }
  const int slot = keep_slot_ == 0 ? 1 : 0;
  store_state(header_of(base_)->slots[slot], kWriting);
  return slot;
}

void MemorySnapshot::commit(int slot, int64_t step, size_t bytes, uint64_t checksum) {
  SegmentHeader* h = header_of(base_);
  const int other = 1 - slot;
  const uint64_t other_epoch =
      load_state(h->slots[other]) == kCommitted ? h->slots[other].epoch : 0;
  SlotHeader& s = h->slots[slot];
  s.step = step;
  s.bytes = bytes;
  s.checksum = checksum;
  s.epoch = other_epoch + 1;  // above the other slot's, which is all a reader compares
  store_state(s, kCommitted);
  keep_slot_ = slot;
}

void MemorySnapshot::save(int64_t step, const std::vector<SnapshotPart>& parts) {
  size_t total = 0;
  for (const SnapshotPart& p : parts) total += p.bytes;
  const int slot = begin_write(total);
  Xxh3State xxh;
  copy_hashed(parts, slot_data(slot), /*into_segment=*/true, xxh.s);
  commit(slot, step, total, XXH3_64bits_digest(xxh.s));
}

std::optional<MemorySnapshot::SlotCopy> MemorySnapshot::last_saved() const {
  if (keep_slot_ < 0) return std::nullopt;
  const SlotHeader& s = header_of(base_)->slots[keep_slot_];
  if (load_state(s) != kCommitted) return std::nullopt;
  return SlotCopy{slot_data(keep_slot_), s.bytes, s.step, s.checksum};
}

std::optional<MemorySnapshot::SlotCopy> MemorySnapshot::verified_slot(int64_t step) const {
  for (const SlotReport& r : verify()) {
    if (!r.usable || r.step != step) continue;
    const SlotHeader& s = header_of(base_)->slots[r.slot];
    return SlotCopy{slot_data(r.slot), s.bytes, s.step, s.checksum};
  }
  return std::nullopt;
}

char* MemorySnapshot::begin_receive(size_t bytes) {
  receiving_slot_ = begin_write(bytes);
  store_state(header_of(base_)->slots[receiving_slot_], kReceiving);
  return slot_data(receiving_slot_);
}

void MemorySnapshot::commit_received(int64_t step, size_t bytes, uint64_t checksum) {
  if (receiving_slot_ < 0 || bytes > capacity_) {
    throw std::logic_error("memory snapshot " + name_ + ": commit_received without begin_receive");
  }
  commit(receiving_slot_, step, bytes, checksum);
  receiving_slot_ = -1;
}

std::vector<MemorySnapshot::SlotReport> MemorySnapshot::verify() const {
  const SegmentHeader* h = header_of(base_);
  std::vector<SlotReport> out;
  uint64_t epochs[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const SlotHeader& s = h->slots[i];
    SlotReport r;
    r.slot = i;
    const uint64_t state = load_state(s);
    if (state == kEmpty) {
      r.why = "never written";
    } else if (state != kCommitted) {
      r.why = state == kWriting     ? "being written (its save did not finish)"
              : state == kReceiving ? "being received (its transfer did not finish)"
                                    : "damaged header";
    } else if (s.bytes > capacity_) {
      r.why = "damaged header (size " + std::to_string(s.bytes) + ")";
    } else {
      r.step = s.step;
      epochs[i] = s.epoch;
      if (XXH3_64bits_dispatch(slot_data(i), s.bytes) == s.checksum) {
        r.usable = true;
      } else {
        r.why = "checksum mismatch (its bytes changed after the save)";
      }
    }
    out.push_back(std::move(r));
  }
  if (epochs[1] > epochs[0]) std::swap(out[0], out[1]);
  keep_slot_ = out[0].usable ? out[0].slot : out[1].usable ? out[1].slot : -1;
  return out;
}

std::vector<int64_t> MemorySnapshot::verified_steps() const {
  std::vector<int64_t> steps;
  for (const SlotReport& r : verify()) {
    if (r.usable) steps.push_back(r.step);
  }
  return steps;
}

bool MemorySnapshot::restore(int64_t step, const std::vector<SnapshotPart>& parts,
                             std::string* why) const {
  const auto refuse = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  const SegmentHeader* h = header_of(base_);
  size_t total = 0;
  for (const SnapshotPart& p : parts) total += p.bytes;
  std::string reasons;
  for (int i = 0; i < 2; ++i) {
    const SlotHeader& s = h->slots[i];
    if (load_state(s) != kCommitted || s.step != step) continue;
    if (s.bytes != total) {
      reasons += "slot " + std::to_string(i) + " holds " + std::to_string(s.bytes) +
                 " bytes, not " + std::to_string(total) + "; ";
      continue;
    }
    Xxh3State xxh;
    copy_hashed(parts, slot_data(i), /*into_segment=*/false, xxh.s);
    if (XXH3_64bits_digest(xxh.s) == s.checksum) {
      keep_slot_ = i;  // the state training goes on from: never the next one overwritten
      return true;
    }
    reasons += "slot " + std::to_string(i) + ": checksum mismatch; ";
  }
  if (reasons.empty()) return refuse("no committed slot holds step " + std::to_string(step));
  reasons.resize(reasons.size() - 2);
  return refuse(reasons);
}

}  // namespace rm

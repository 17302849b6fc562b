// MemorySnapshot (memory_snapshot.h) with real shared memory, real processes and real SIGKILLs:
// saves restore exactly, a writer killed at random moments always leaves a verified slot of the
// last completed save (or the one it was finishing), a flipped byte is caught and the other slot
// named, another owner's segment is never read, and no test leaves a segment in /dev/shm.
#include "checkpoint/memory_snapshot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/io_error.h"
#include "testing/temp_dir.h"

namespace rm {
namespace {

// The layout the damage test reaches into: a 4096-byte header page, then two slots, each
// rounded up to whole pages.
constexpr size_t kHeaderPage = 4096;

uint64_t test_key(int salt) { return (static_cast<uint64_t>(getpid()) << 16) ^ salt; }

// The state after `step`: a fixed pattern with the step stamped into its first and last 8
// bytes, so a restored slot says which step it holds and a slot torn between two saves shows;
// cheap to make, so that a killed writer is almost always inside its save.
const std::vector<uint8_t>& pattern(size_t bytes) {
  static std::vector<uint8_t> p;
  if (p.size() != bytes) {
    p.resize(bytes);
    for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  }
  return p;
}
std::vector<uint8_t> state_of(int64_t step, size_t bytes) {
  std::vector<uint8_t> v = pattern(bytes);
  std::memcpy(v.data(), &step, sizeof step);
  std::memcpy(v.data() + bytes - sizeof step, &step, sizeof step);
  return v;
}

// Two parts, as a rank's parameters and moments would be.
void save_step(MemorySnapshot& snap, int64_t step, size_t bytes) {
  std::vector<uint8_t> v = state_of(step, bytes);
  const size_t half = bytes / 3;
  snap.save(step, {{v.data(), half}, {v.data() + half, bytes - half}});
}

bool restores_step(const MemorySnapshot& snap, int64_t step, size_t bytes, std::string* why) {
  std::vector<uint8_t> got(bytes, 0);
  const size_t half = bytes / 3;
  if (!snap.restore(step, {{got.data(), half}, {got.data() + half, bytes - half}}, why)) {
    return false;
  }
  if (got != state_of(step, bytes)) {
    *why = "restored bytes differ from the state of step " + std::to_string(step);
    return false;
  }
  return true;
}

std::vector<std::string> segments_in_dev_shm(const std::string& name) {
  std::vector<std::string> found;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (("/" + std::string(e->d_name)) == name) found.push_back(e->d_name);
    }
    closedir(d);
  }
  return found;
}

// Removes the segment at the end of each test and checks that nothing is left.
class SegmentGuard {
 public:
  explicit SegmentGuard(std::string name) : name_(std::move(name)) {}
  ~SegmentGuard() {
    MemorySnapshot::remove(name_);
    EXPECT_TRUE(segments_in_dev_shm(name_).empty()) << name_ << " left in /dev/shm";
  }

 private:
  std::string name_;
};

TEST(MemorySnapshot, SavesRestoreExactlyAndTheOlderSlotIsOverwrittenFirst) {
  const std::string name = memory_snapshot_name(test_key(1), 0);
  SegmentGuard guard(name);
  const size_t bytes = 3 * 1024 * 1024 + 17;  // crosses the copy's 1 MiB chunks unevenly
  MemorySnapshot snap = MemorySnapshot::create(name, 42, bytes);
  EXPECT_TRUE(snap.verified_steps().empty());
  EXPECT_EQ(segments_in_dev_shm(name).size(), 1u);
  save_step(snap, 10, bytes);
  save_step(snap, 11, bytes);
  EXPECT_EQ(snap.verified_steps(), (std::vector<int64_t>{11, 10}));
  std::string why;
  EXPECT_TRUE(restores_step(snap, 10, bytes, &why)) << why;
  EXPECT_TRUE(restores_step(snap, 11, bytes, &why)) << why;
  save_step(snap, 12, bytes);  // replaces 10: not the state restored last (training's)
  EXPECT_EQ(snap.verified_steps(), (std::vector<int64_t>{12, 11}));
  EXPECT_FALSE(restores_step(snap, 10, bytes, &why));
  EXPECT_EQ(why, "no committed slot holds step 10");
  // Another process (here: another mapping) of the same run sees the same.
  std::optional<MemorySnapshot> again = MemorySnapshot::open(name, 42, bytes, &why);
  ASSERT_TRUE(again) << why;
  EXPECT_EQ(again->verified_steps(), (std::vector<int64_t>{12, 11}));
  EXPECT_TRUE(restores_step(*again, 12, bytes, &why)) << why;
  // Restoring the older state means training goes on from it: the next save keeps it and
  // replaces the newer one (a future that will be computed again).
  EXPECT_TRUE(restores_step(*again, 11, bytes, &why)) << why;
  save_step(*again, 12, bytes);
  EXPECT_EQ(again->verified_steps(), (std::vector<int64_t>{12, 11}));
  // Sizes must match exactly.
  std::vector<uint8_t> small(bytes - 1);
  EXPECT_FALSE(again->restore(12, {{small.data(), small.size()}}, &why));
  EXPECT_NE(why.find("not " + std::to_string(bytes - 1)), std::string::npos) << why;
}

TEST(MemorySnapshot, AStateTooLargeForTheSlotIsRefusedBeforeAnythingIsWritten) {
  const std::string name = memory_snapshot_name(test_key(2), 0);
  SegmentGuard guard(name);
  MemorySnapshot snap = MemorySnapshot::create(name, 7, 4096);
  save_step(snap, 1, 4096);
  std::vector<uint8_t> big(4097);
  EXPECT_THROW(snap.save(2, {{big.data(), big.size()}}), std::invalid_argument);
  EXPECT_EQ(snap.verified_steps(), (std::vector<int64_t>{1}));
}

TEST(MemorySnapshot, AnotherOwnersOrAnotherSizesSegmentIsNeverRead) {
  const std::string name = memory_snapshot_name(test_key(3), 1);
  SegmentGuard guard(name);
  {
    MemorySnapshot old_job = MemorySnapshot::create(name, 1111, 8192);
    save_step(old_job, 5, 8192);
  }
  std::string why;
  EXPECT_FALSE(MemorySnapshot::open(name, 2222, 8192, &why));
  EXPECT_NE(why.find("another run's segment"), std::string::npos) << why;
  EXPECT_FALSE(MemorySnapshot::open(name, 1111, 4096, &why));
  EXPECT_NE(why.find("size"), std::string::npos) << why;
  // The new owner's create starts empty: step 5 of the other job is gone, not restored.
  MemorySnapshot new_job = MemorySnapshot::create(name, 2222, 8192);
  EXPECT_TRUE(new_job.verified_steps().empty());
  EXPECT_FALSE(MemorySnapshot::open(name, 1111, 8192, &why));
  // And the same owner's create keeps what it saved (a restarted rank of the same run).
  save_step(new_job, 6, 8192);
  MemorySnapshot same = MemorySnapshot::create(name, 2222, 8192);
  EXPECT_EQ(same.verified_steps(), (std::vector<int64_t>{6}));
  EXPECT_FALSE(MemorySnapshot::open(memory_snapshot_name(test_key(4), 0), 2222, 8192, &why));
  EXPECT_EQ(why, "no segment");
}

// A segment whose run directory is gone is an orphan, removed by remove_orphans(); one whose
// directory is there, whose directory's parent is gone too (a file system not mounted), or that
// has no home, stays.
TEST(MemorySnapshot, OrphansAreSegmentsWhoseHomeIsGone) {
  TempDir dir;
  const std::string kept_home = dir.file("live"), gone_home = dir.file("crashed");
  std::filesystem::create_directories(kept_home);
  std::filesystem::create_directories(gone_home);
  const std::string kept = memory_snapshot_name(test_key(20), 0);
  const std::string gone = memory_snapshot_name(test_key(21), 0);
  const std::string unmounted = memory_snapshot_name(test_key(22), 0);
  const std::string homeless = memory_snapshot_name(test_key(23), 0);
  SegmentGuard g1(kept), g2(gone), g3(unmounted), g4(homeless);
  MemorySnapshot::create(kept, 1, 4096, kept_home);
  MemorySnapshot::create(gone, 1, 4096, gone_home + "/");
  MemorySnapshot::create(unmounted, 1, 4096, dir.file("not-mounted/run"));
  MemorySnapshot::create(homeless, 1, 4096);
  // "/ringmaster-" and the key's digits of this process's pid: only this test's segments.
  const std::string prefix = memory_snapshot_name(test_key(2), 0).substr(0, 24);

  EXPECT_TRUE(MemorySnapshot::remove_orphans(prefix).empty());  // every home is still there
  std::filesystem::remove(gone_home);
  const std::vector<std::string> removed = MemorySnapshot::remove_orphans(prefix);
  EXPECT_EQ(removed, (std::vector<std::string>{gone + " (" + gone_home + ")"}));
  EXPECT_TRUE(segments_in_dev_shm(gone).empty());
  for (const std::string& name : {kept, unmounted, homeless}) {
    EXPECT_EQ(segments_in_dev_shm(name).size(), 1u) << name;
  }
}

// A FIFO in /dev/shm named like a segment (anyone on the host may make one) is passed over at
// once by the sweeps every rank's start runs, and by open(); before, opening it waited for a
// writer for ever.
TEST(MemorySnapshot, AFifoNamedLikeASegmentIsPassedOverWithoutWaiting) {
  const std::string name = memory_snapshot_name(test_key(30), 0);
  const std::string path = "/dev/shm" + name;
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  auto sweep = std::async(std::launch::async, [&] {
    std::string why;
    const bool swept = MemorySnapshot::remove_orphans(name).empty() &&
                       MemorySnapshot::remove_homed(name, "/nowhere").empty();
    const bool opened = MemorySnapshot::open(name, 1, 4096, &why).has_value();
    return swept && !opened ? why : "swept or opened it";
  });
  const bool done = sweep.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  // Where an open waits, a writer lets it go, so that the test ends.
  while (sweep.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
    const int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  EXPECT_TRUE(done) << "opening the FIFO waited (10 s) for a writer";
  EXPECT_EQ(sweep.get(), "not a regular file");
  ::unlink(path.c_str());
}

// A segment whose mapping fails (here: the address-space limit) is removed before create()
// throws: it is not marked as ours yet, so no sweep would ever remove its reserved RAM.
TEST(MemorySnapshot, ASegmentThatCannotBeMappedIsNotLeftBehind) {
  const std::string name = memory_snapshot_name(test_key(31), 0);
  const size_t slot = size_t{64} << 20;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Room for what the process maps now and a little more, not for two 64 MiB slots.
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (rlim_t{16} << 20);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    try {
      MemorySnapshot::create(name, 1, slot);
    } catch (const IoError&) {
      _exit(0);
    } catch (...) {
      _exit(4);
    }
    _exit(5);  // mapped after all: the limit did not bite
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const bool left = !segments_in_dev_shm(name).empty();
  MemorySnapshot::remove(name);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "3: setrlimit failed, 4: not an IoError, 5: no failure";
  EXPECT_FALSE(left) << name << " was left in /dev/shm after its mapping failed";
}

TEST(MemorySnapshot, AFlippedByteIsCaughtAndTheOtherSlotIsUsed) {
  const std::string name = memory_snapshot_name(test_key(5), 0);
  SegmentGuard guard(name);
  const size_t bytes = 10000;  // a slot of 3 pages
  MemorySnapshot snap = MemorySnapshot::create(name, 9, bytes);
  save_step(snap, 1, bytes);  // slot 0
  save_step(snap, 2, bytes);  // slot 1
  // Flip one byte of slot 1 through the file system, as a stray write would.
  const std::string path = "/dev/shm" + name;
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  const long offset = static_cast<long>(kHeaderPage + 3 * 4096 + 1234);
  ASSERT_EQ(std::fseek(f, offset, SEEK_SET), 0);
  const int c = std::fgetc(f);
  ASSERT_EQ(std::fseek(f, offset, SEEK_SET), 0);
  std::fputc(c ^ 0x10, f);
  std::fclose(f);

  const std::vector<MemorySnapshot::SlotReport> slots = snap.verify();
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].step, 2);  // the newest first, and not usable
  EXPECT_FALSE(slots[0].usable);
  EXPECT_NE(slots[0].why.find("checksum mismatch"), std::string::npos) << slots[0].why;
  EXPECT_TRUE(slots[1].usable);
  EXPECT_EQ(snap.verified_steps(), (std::vector<int64_t>{1}));
  std::string why;
  EXPECT_FALSE(restores_step(snap, 2, bytes, &why));
  EXPECT_EQ(why, "slot 1: checksum mismatch");
  EXPECT_TRUE(restores_step(snap, 1, bytes, &why)) << why;
  // The next save goes into the damaged slot, not over the only good one.
  save_step(snap, 3, bytes);
  EXPECT_EQ(snap.verified_steps(), (std::vector<int64_t>{3, 1}));
}

// A replica: each save's slot copied as it is into another segment (as a partner host receives
// it) restores exactly; a byte damaged on the way is caught by the sender's checksum and the
// replica's older slot is used; a receive never overwrites the newest received slot.
TEST(MemorySnapshot, AReceivedSlotRestoresAndDamageOnTheWayIsCaught) {
  const std::string mine = memory_snapshot_name(test_key(7), 0);
  const std::string theirs = memory_snapshot_name(test_key(7), 1) + "-replica";
  SegmentGuard guard_mine(mine), guard_theirs(theirs);
  const size_t bytes = 2 * 1024 * 1024 + 5;
  MemorySnapshot snap = MemorySnapshot::create(mine, 5, bytes);
  MemorySnapshot replica = MemorySnapshot::create(theirs, 6, bytes);
  EXPECT_FALSE(snap.last_saved());
  const auto send = [&](bool damage) {
    const std::optional<MemorySnapshot::SlotCopy> c = snap.last_saved();
    ASSERT_TRUE(c);
    char* dst = replica.begin_receive(c->bytes);
    std::memcpy(dst, c->data, c->bytes);
    if (damage) dst[c->bytes / 2] ^= 0x01;
    replica.commit_received(c->step, c->bytes, c->checksum);
  };
  save_step(snap, 1, bytes);
  ASSERT_TRUE(snap.last_saved());
  EXPECT_EQ(snap.last_saved()->step, 1);
  send(false);
  save_step(snap, 2, bytes);
  send(false);
  EXPECT_EQ(replica.verified_steps(), (std::vector<int64_t>{2, 1}));
  std::string why;
  EXPECT_TRUE(restores_step(replica, 1, bytes, &why)) << why;
  EXPECT_TRUE(restores_step(replica, 2, bytes, &why)) << why;
  save_step(snap, 3, bytes);
  send(true);  // over step 1, never over step 2 (the newest received)
  const std::vector<MemorySnapshot::SlotReport> slots = replica.verify();
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].step, 3);
  EXPECT_FALSE(slots[0].usable);
  EXPECT_NE(slots[0].why.find("checksum mismatch"), std::string::npos) << slots[0].why;
  EXPECT_EQ(replica.verified_steps(), (std::vector<int64_t>{2}));
  EXPECT_FALSE(replica.verified_slot(3));
  ASSERT_TRUE(replica.verified_slot(2));
  EXPECT_EQ(replica.verified_slot(2)->checksum, snap.verified_slot(2)->checksum);
  EXPECT_FALSE(restores_step(replica, 3, bytes, &why));
  EXPECT_THROW(replica.begin_receive(bytes + 1), std::invalid_argument);
  // A transfer that never finished (its sender lost): the slot is named as such, never used,
  // and the newest received one is kept.
  replica.begin_receive(bytes);
  bool named = false;
  for (const MemorySnapshot::SlotReport& r : replica.verify()) {
    named |= !r.usable && r.why == "being received (its transfer did not finish)";
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(replica.verified_steps(), (std::vector<int64_t>{2}));
}

// A child saves steps 1, 2, 3, ... of a 24 MiB state and reports each completed save on a pipe;
// the parent SIGKILLs it at a different moment each round. Afterwards the segment must hold the
// last reported step or the one after it (committed before the report), verified, with exactly
// that step's bytes, and every other slot must be either verified and right, or refused.
TEST(MemorySnapshot, AWriterKilledAtAnyMomentLeavesTheLastSaveRestorable) {
  const std::string name = memory_snapshot_name(test_key(6), 0);
  SegmentGuard guard(name);
  const size_t bytes = 24u << 20;
  const uint64_t owner = 77;
  MemorySnapshot::create(name, owner, bytes);  // made once; each child opens the same
  int64_t first = 1;
  int killed_inside_a_save = 0;
  for (int round = 0; round < 12; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      MemorySnapshot snap = MemorySnapshot::create(name, owner, bytes);
      std::vector<uint8_t> v = pattern(bytes);
      for (int64_t step = first;; ++step) {
        std::memcpy(v.data(), &step, sizeof step);
        std::memcpy(v.data() + bytes - sizeof step, &step, sizeof step);
        snap.save(step, {{v.data(), bytes / 3}, {v.data() + bytes / 3, bytes - bytes / 3}});
        if (write(fds[1], &step, sizeof step) != sizeof step) _exit(3);
      }
    }
    close(fds[1]);
    // Wait for the first completed save, then let it run into the next ones for a while.
    int64_t reported = -1, s = 0;
    ASSERT_EQ(read(fds[0], &s, sizeof s), static_cast<ssize_t>(sizeof s));
    reported = s;
    usleep(1000 + 3000 * round);
    kill(child, SIGKILL);
    while (read(fds[0], &s, sizeof s) == static_cast<ssize_t>(sizeof s)) reported = s;
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));

    std::string why;
    std::optional<MemorySnapshot> snap = MemorySnapshot::open(name, owner, bytes, &why);
    ASSERT_TRUE(snap) << why;
    const std::vector<int64_t> steps = snap->verified_steps();
    ASSERT_FALSE(steps.empty()) << "round " << round << ": no verified slot";
    EXPECT_TRUE(steps[0] == reported || steps[0] == reported + 1)
        << "round " << round << ": newest verified step " << steps[0] << ", last reported "
        << reported;
    for (const int64_t step : steps) {
      EXPECT_TRUE(restores_step(*snap, step, bytes, &why)) << "round " << round << ": " << why;
    }
    for (const MemorySnapshot::SlotReport& r : snap->verify()) {
      killed_inside_a_save += r.why.rfind("being written", 0) == 0;
    }
    first = steps[0] + 1;
  }
  // The test did what it says: some kills landed inside a save, leaving a slot half-written.
  std::printf("killed inside a save in %d of 12 rounds\n", killed_inside_a_save);
  EXPECT_GT(killed_inside_a_save, 0);
}

}  // namespace
}  // namespace rm

#include "checkpoint/retention.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"

namespace rm {
namespace {

std::vector<std::string> names(const std::string& run_dir) {
  std::vector<std::string> out = io::list_dir(checkpoints_root(run_dir));
  std::sort(out.begin(), out.end());
  return out;
}

void save_steps(const std::string& run_dir, int64_t first, int64_t last) {
  for (int64_t s = first; s <= last; ++s) testutil::save_steps_checkpoint(run_dir, s, 2, 64);
}

void corrupt(const std::string& file) {
  const int fd = ::open(file.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "\x7f", 1, 5), 1);
  ::close(fd);
}

TEST(Retention, KeepsTheNewest) {
  TempDir dir;
  save_steps(dir.path(), 1, 6);
  const auto removed = apply_retention(dir.path(), 2);
  EXPECT_EQ(removed.size(), 4u);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000005", "step_00000006"}));
  EXPECT_TRUE(apply_retention(dir.path(), 2).empty());  // idempotent
}

// A checkpoint a reader has pinned (eval of a live run) stays until the first retention after
// the reader is done; the others go as usual.
TEST(Retention, APinnedCheckpointIsLeftForALaterRetention) {
  TempDir dir;
  save_steps(dir.path(), 1, 4);
  const std::string pinned = checkpoint_path(dir.path(), 2);
  {
    const auto pin = CheckpointPin::take(pinned);
    ASSERT_TRUE(pin && pin->holds());
    apply_retention(dir.path(), 1);
    EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000002", "step_00000004"}));
    EXPECT_TRUE(verify_checkpoint(pinned).ok);  // whole, not half removed
  }
  apply_retention(dir.path(), 1);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000004"}));
}

// find_resume_checkpoint's choice is pinned while the caller holds it: the run saving on and
// retention keeping one checkpoint do not take it from under a reader.
TEST(Retention, TheCheckpointFoundStaysWhileItsFinderHoldsIt) {
  TempDir dir;
  save_steps(dir.path(), 1, 2);
  auto found = find_resume_checkpoint(dir.path());
  ASSERT_TRUE(found);
  ASSERT_EQ(found->step, 2);
  save_steps(dir.path(), 3, 3);
  apply_retention(dir.path(), 1);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000002", "step_00000003"}));
  EXPECT_TRUE(verify_checkpoint(found->path).ok);
  found.reset();
  apply_retention(dir.path(), 1);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000003"}));
}

// A reader that opens a checkpoint as retention renames it away learns that it is gone, instead
// of reading the directory retention is about to empty.
TEST(Retention, APinTakenAsRetentionRenamesTheCheckpointIsGone) {
  TempDir dir;
  save_steps(dir.path(), 1, 1);
  const std::string path = checkpoint_path(dir.path(), 1);
  io::Fd claim;
  ASSERT_TRUE(claim_for_removal(path, &claim));
  ASSERT_TRUE(claim.valid());
  std::optional<CheckpointPin> pin;
  std::atomic<bool> taking{false}, taken{false};
  std::thread reader([&] {
    taking = true;
    pin = CheckpointPin::take(path);  // waits for the claim (or opens after the rename)
    taken = true;
  });
  // The reader is at take() before the claim is judged (a reader that started only after the
  // rename below would find the checkpoint gone whether or not the claim kept it out).
  while (!taking) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(taken);  // the claim keeps readers out
  io::Fd other;
  EXPECT_FALSE(claim_for_removal(path, &other));  // one claim at a time
  std::filesystem::rename(path, path + ".del.tmp");
  claim = io::Fd();
  reader.join();
  EXPECT_TRUE(taken);
  EXPECT_FALSE(pin.has_value());
  EXPECT_FALSE(CheckpointPin::take(path).has_value());
  const VerifyResult v = verify_checkpoint(path);
  EXPECT_TRUE(v.gone);
  EXPECT_FALSE(v.ok);
}

// A pin through checkpoints/best holds, and reads through, the checkpoint the link named then:
// retention pointing the link at a better one meanwhile neither removes it nor mixes the two.
TEST(Retention, APinThroughTheBestLinkHoldsWhatItNamed) {
  TempDir dir;
  save_steps(dir.path(), 1, 3);
  const std::string link = io::join(checkpoints_root(dir.path()), kBestLink);
  io::replace_symlink("step_00000002", link);
  const auto pin = CheckpointPin::take(link);
  ASSERT_TRUE(pin && pin->holds());
  EXPECT_EQ(io::base_name(pin->path()), "step_00000002");
  io::replace_symlink("step_00000003", link);
  apply_retention(dir.path(), 1);
  EXPECT_TRUE(pin->still_there());
  EXPECT_TRUE(verify_checkpoint(pin->path()).ok);
  EXPECT_EQ(load_manifest(pin->path()).step, 2);
}

// A --from resume's removal of the line it leaves: a reader's pin is waited for (here it goes
// within the wait), then overridden (here it outlasts it), for all of them together; a stop cuts
// the wait short; a name not step_N is refused before anything is removed.
TEST(Retention, RemovingALinesCheckpointsWaitsForTheirReadersAWhile) {
  TempDir dir;
  save_steps(dir.path(), 1, 5);
  std::optional<CheckpointPin> pin = CheckpointPin::take(checkpoint_path(dir.path(), 5));
  ASSERT_TRUE(pin && pin->holds());
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    pin.reset();
  });
  const auto t0 = std::chrono::steady_clock::now();
  remove_checkpoints_of_run({checkpoint_path(dir.path(), 5)}, {std::chrono::seconds(20), nullptr});
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  reader.join();
  EXPECT_EQ(names(dir.path()).size(), 4u);
  {
    // Two held: 1 s for both, not each.
    const auto held3 = CheckpointPin::take(checkpoint_path(dir.path(), 3));
    const auto held4 = CheckpointPin::take(checkpoint_path(dir.path(), 4));
    ASSERT_TRUE(held3 && held3->holds() && held4 && held4->holds());
    const auto t1 = std::chrono::steady_clock::now();
    remove_checkpoints_of_run({checkpoint_path(dir.path(), 3), checkpoint_path(dir.path(), 4)},
                              {std::chrono::milliseconds(1000), nullptr});
    EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(1800));
    EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000001", "step_00000002"}));
    // A stop: at once, though 20 s were allowed.
    const auto held2 = CheckpointPin::take(checkpoint_path(dir.path(), 2));
    ASSERT_TRUE(held2 && held2->holds());
    const auto t2 = std::chrono::steady_clock::now();
    remove_checkpoints_of_run({checkpoint_path(dir.path(), 2)},
                              {std::chrono::seconds(20), [] { return true; }});
    EXPECT_LT(std::chrono::steady_clock::now() - t2, std::chrono::seconds(5));
  }
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000001"}));
  EXPECT_THROW(
      remove_checkpoints_of_run({checkpoint_path(dir.path(), 1), dir.path() + "/checkpoints"}, {}),
      CheckpointError);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000001"}));
}

TEST(Retention, KeepEveryKeepsMilestones) {
  TempDir dir;
  save_steps(dir.path(), 1, 10);
  apply_retention(dir.path(), 2, 4);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000004", "step_00000008",
                                                         "step_00000009", "step_00000010"}));
}

// checkpoint.keep_best: of the checkpoints marked best, the lowest loss is kept beside the newest
// and linked as checkpoints/best (5 is marked too, worse: as after a resume that lost track).
TEST(Retention, KeepBestKeepsTheLowestMarkedOneAndLinksIt) {
  TempDir dir;
  const auto best = [](double loss) {
    return nlohmann::json{{"best", true}, {"best_val_loss", loss}};
  };
  for (int64_t s = 1; s <= 6; ++s) {
    const nlohmann::json state = s == 2   ? best(2.0)
                                 : s == 4 ? best(1.5)
                                 : s == 5 ? best(1.8)
                                          : nlohmann::json();
    testutil::save_steps_checkpoint(dir.path(), s, 2, 64, state);
  }
  apply_retention(dir.path(), 1, 0, /*keep_best=*/true);
  EXPECT_EQ(names(dir.path()),
            (std::vector<std::string>{"best", "step_00000004", "step_00000006"}));
  const std::string link = io::join(checkpoints_root(dir.path()), kBestLink);
  char target[64] = {};
  ASSERT_GT(::readlink(link.c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "step_00000004");  // relative: a moved run directory keeps it
  EXPECT_EQ(load_manifest(link).step, 4);
  // A better one replaces it; the link moves before the old best goes.
  testutil::save_steps_checkpoint(dir.path(), 7, 2, 64, best(1.0));
  apply_retention(dir.path(), 1, 0, true);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"best", "step_00000007"}));
  EXPECT_EQ(load_manifest(link).step, 7);
  EXPECT_EQ(find_resume_checkpoint(dir.path())->step, 7);
}

// After a --from resume removed the line it left (the best among it): the link leads to the best
// of those left, and where none is marked, it goes rather than lead nowhere.
TEST(Retention, TheBestLinkIsMadeAgainFromWhatIsLeft) {
  TempDir dir;
  const auto best = [](double loss) {
    return nlohmann::json{{"best", true}, {"best_val_loss", loss}};
  };
  testutil::save_steps_checkpoint(dir.path(), 1, 2, 64);
  testutil::save_steps_checkpoint(dir.path(), 2, 2, 64, best(2.0));
  testutil::save_steps_checkpoint(dir.path(), 3, 2, 64, best(1.0));
  apply_retention(dir.path(), 5, 0, true);
  const std::string link = io::join(checkpoints_root(dir.path()), kBestLink);
  ASSERT_EQ(load_manifest(link).step, 3);
  remove_checkpoints_of_run({checkpoint_path(dir.path(), 3)}, {});
  EXPECT_EQ(relink_best_checkpoint(dir.path(), true), "step_00000002");
  EXPECT_EQ(load_manifest(link).step, 2);
  remove_checkpoints_of_run({checkpoint_path(dir.path(), 2)}, {});
  EXPECT_EQ(relink_best_checkpoint(dir.path(), true), "");
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000001"}));
}

// Without keep_best (a run resumed with it off) the marks count for nothing and the link the
// earlier run left goes with the checkpoint it pointed to.
TEST(Retention, MarksAreIgnoredWithoutKeepBest) {
  TempDir dir;
  testutil::save_steps_checkpoint(dir.path(), 1, 2, 64, {{"best", true}, {"best_val_loss", 1.0}});
  apply_retention(dir.path(), 1, 0, true);
  ASSERT_EQ(names(dir.path()), (std::vector<std::string>{"best", "step_00000001"}));
  save_steps(dir.path(), 2, 3);
  apply_retention(dir.path(), 1);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000003"}));
}

// The link is a pointer: where it cannot be made (here a directory stands in its way), the save
// and the retention go on, the best still kept.
TEST(Retention, ALinkThatCannotBeMadeCostsOnlyTheLink) {
  TempDir dir;
  testutil::save_steps_checkpoint(dir.path(), 1, 2, 64, {{"best", true}, {"best_val_loss", 1.0}});
  save_steps(dir.path(), 2, 3);
  const std::string blocker = io::join(checkpoints_root(dir.path()), kBestLink);
  ASSERT_TRUE(std::filesystem::create_directories(blocker + "/in-the-way"));
  EXPECT_NO_THROW(apply_retention(dir.path(), 1, 0, true));
  EXPECT_EQ(names(dir.path()),
            (std::vector<std::string>{"best", "step_00000001", "step_00000003"}));
}

TEST(Retention, NeverDeletesTheNewestVerifiedOne) {
  TempDir dir;
  save_steps(dir.path(), 1, 4);
  corrupt(io::join(checkpoint_path(dir.path(), 4), "shard_00001.bin"));
  apply_retention(dir.path(), 1);
  // 3 is the newest that verifies: kept. 4 failed: left for a person. 1, 2: deleted.
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000003", "step_00000004"}));
  EXPECT_EQ(find_resume_checkpoint(dir.path())->step, 3);
}

// The checkpoint just committed was read back by its writers (write_shard): retention checks
// it structurally and takes it as the anchor without reading it again. Damage made after its
// writers read it back therefore goes unseen here (a resume still verifies every byte, and
// skips it for the older one kept beside it); an older checkpoint is read as before.
TEST(Retention, TheCheckpointJustCommittedIsNotReadAgain) {
  TempDir dir;
  save_steps(dir.path(), 1, 4);
  corrupt(io::join(checkpoint_path(dir.path(), 4), "shard_00001.bin"));
  apply_retention(dir.path(), 2, 0, false, {}, /*read_back_step=*/4);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000003", "step_00000004"}));
  EXPECT_EQ(find_resume_checkpoint(dir.path())->step, 3);
  // Another step's read-back says nothing of step 4: read, it fails, and 3 is the anchor.
  TempDir other;
  save_steps(other.path(), 1, 4);
  corrupt(io::join(checkpoint_path(other.path(), 4), "shard_00001.bin"));
  apply_retention(other.path(), 1, 0, false, {}, /*read_back_step=*/3);
  EXPECT_EQ(names(other.path()), (std::vector<std::string>{"step_00000003", "step_00000004"}));
}

TEST(Retention, NothingVerifiesNothingDeleted) {
  TempDir dir;
  save_steps(dir.path(), 1, 2);
  corrupt(io::join(checkpoint_path(dir.path(), 1), "shard_00000.bin"));
  corrupt(io::join(checkpoint_path(dir.path(), 2), "shard_00000.bin"));
  EXPECT_TRUE(apply_retention(dir.path(), 1).empty());
  EXPECT_EQ(names(dir.path()).size(), 2u);
}

TEST(Retention, LeavesStructurallyBrokenOnesAlone) {
  TempDir dir;
  save_steps(dir.path(), 1, 3);
  io::unlink_file(io::join(checkpoint_path(dir.path(), 1), kManifestFileName));
  apply_retention(dir.path(), 1);
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000001", "step_00000003"}));
}

TEST(Retention, RemovesStaleScratchButNotASaveInFlight) {
  TempDir dir;
  save_steps(dir.path(), 1, 5);
  const std::string root = checkpoints_root(dir.path());
  for (const char* name :
       {"step_00000002.tmp", "step_00000004.del.tmp", "step_00000005.tmp", "step_00000009.tmp"}) {
    io::make_dir(io::join(root, name));
    std::ofstream(io::join(io::join(root, name), "shard_00000.bin")) << "partial";
  }
  const auto removed = apply_retention(dir.path(), 3);
  EXPECT_EQ(removed.size(), 5u);  // steps 1, 2 and three scratch directories
  // step_00000009.tmp may be a later save still being written by another rank.
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"step_00000003", "step_00000004",
                                                         "step_00000005", "step_00000009.tmp"}));
  // A crash between making the best link's scratch and renaming it leaves the scratch.
  ASSERT_EQ(::symlink("step_00000005", io::join(root, "best.tmp.4242").c_str()), 0);
  std::ofstream(io::join(root, "best.tmp.notes")) << "not ours";
  std::ofstream(io::join(root, "best.tmp.77")) << "not a link: not ours either";
  EXPECT_EQ(remove_incomplete_checkpoints(dir.path()).size(), 2u);  // at start-up: all scratch
  EXPECT_EQ(names(dir.path()),
            (std::vector<std::string>{"best.tmp.77", "best.tmp.notes", "step_00000003",
                                      "step_00000004", "step_00000005"}));
}

TEST(Retention, RejectsKeepBelowOne) {
  TempDir dir;
  EXPECT_THROW(apply_retention(dir.path(), 0), CheckpointError);
  EXPECT_TRUE(apply_retention(dir.path(), 1).empty());  // no checkpoints/ yet
}

}  // namespace
}  // namespace rm

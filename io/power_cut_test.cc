// The simulated power cut itself: what survives it must be exactly what was fsynced (file data)
// and what a directory fsync covered (entries). If these fail, every crash-safety test built on
// the fault layer proves nothing.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/journal_format.h"

namespace rm {
namespace io {
namespace {

using test::content;
using test::FaultyRun;
using test::write_text;

void write_unsynced(const std::string& path, const std::string& text) {
  Fd fd = open_write_truncate(path);
  write_all(fd.get(), text.data(), text.size(), path);
  fd.close_checked(path);
}

TEST(PowerCut, DataNotFsyncedIsLostEvenWhenTheEntryIsDurable) {
  FaultyRun r;
  write_unsynced(r.at("a"), "hello");
  fsync_directory(r.run());  // the name is durable, the bytes are not
  const PowerCutReport rep = r.power_cut();
  EXPECT_EQ(content(r.at("a")), "");
  EXPECT_EQ(rep.files_truncated, 1);
}

TEST(PowerCut, AFsyncedFileWhoseDirectoryWasNotFsyncedIsGone) {
  FaultyRun r;
  {
    Fd fd = open_write_truncate(r.at("a"));
    write_all(fd.get(), "hello", 5, r.at("a"));
    fsync_fd(fd.get(), r.at("a"));
  }
  r.power_cut();
  EXPECT_EQ(content(r.at("a")), "<absent>");
}

TEST(PowerCut, OnlyTheBytesTheLastFsyncCoveredSurvive) {
  FaultyRun r;
  {
    Fd fd = open_write_truncate(r.at("a"));
    write_all(fd.get(), "hello", 5, r.at("a"));
    fsync_fd(fd.get(), r.at("a"));
    write_all(fd.get(), " world", 6, r.at("a"));
  }
  fsync_directory(r.run());
  r.power_cut();
  EXPECT_EQ(content(r.at("a")), "hello");
}

TEST(PowerCut, KeepWrittenModeKeepsUnsyncedBytes) {
  FaultyRun r;
  write_unsynced(r.at("a"), "hello");
  fsync_directory(r.run());
  r.power_cut(CutMode::kKeepWritten);
  EXPECT_EQ(content(r.at("a")), "hello");
}

TEST(PowerCut, DurableAtomicWriteSurvivesWhole) {
  FaultyRun r;
  write_text(r.at("a"), "old");
  write_text(r.at("a"), "new");
  r.power_cut();
  EXPECT_EQ(content(r.at("a")), "new");
  EXPECT_EQ(list_dir(r.run()).size(), 1u);  // no temporary file either
}

TEST(PowerCut, VisibleOnlyReplacementRevertsToTheOldFile) {
  FaultyRun r;
  write_text(r.at("a"), "old");
  write_text(r.at("a"), "new", Durability::kVisibleOnly);
  EXPECT_EQ(content(r.at("a")), "new");
  const PowerCutReport rep = r.power_cut();
  EXPECT_EQ(content(r.at("a")), "old");  // the replaced file came back from the stash
  EXPECT_GE(rep.entries_undone, 2);      // the rename, the temporary file's creation
}

TEST(PowerCut, UnlinkAndRmdirWithoutDirectoryFsyncAreUndone) {
  FaultyRun r;
  make_dir(r.at("d"));
  write_text(join(r.at("d"), "f"), "data");
  fsync_directory(r.run());
  unlink_file(join(r.at("d"), "f"));
  ASSERT_EQ(fs().rmdir(r.at("d").c_str()), 0);
  r.power_cut();
  EXPECT_EQ(content(join(r.at("d"), "f")), "data");
}

TEST(PowerCut, RemoveTreeIsDurableBecauseItFsyncsTheParent) {
  FaultyRun r;
  make_dir(r.at("d"));
  write_text(join(r.at("d"), "f"), "data");
  fsync_directory(r.run());
  remove_tree(r.at("d"));
  r.power_cut();
  EXPECT_FALSE(exists(r.at("d")));
}

TEST(PowerCut, DirectoryRenameRevertsUntilTheParentIsFsynced) {
  FaultyRun r;
  make_dir(r.at("step.tmp"));
  write_text(join(r.at("step.tmp"), "f"), "data");
  fsync_directory(r.run());
  rename_path(r.at("step.tmp"), r.at("step"));
  {
    FaultyRun copy;  // the same sequence, this time with the parent fsynced after the rename
    make_dir(copy.at("step.tmp"));
    write_text(join(copy.at("step.tmp"), "f"), "data");
    fsync_directory(copy.run());
    rename_path(copy.at("step.tmp"), copy.at("step"));
    fsync_directory(copy.run());
    EXPECT_TRUE(rename_made_durable(copy.journal(), copy.at("step")));
    copy.power_cut();
    EXPECT_EQ(content(join(copy.at("step"), "f")), "data");
    EXPECT_FALSE(exists(copy.at("step.tmp")));
  }
  EXPECT_FALSE(rename_made_durable(r.journal(), r.at("step")));
  r.power_cut();
  EXPECT_FALSE(exists(r.at("step")));
  EXPECT_EQ(content(join(r.at("step.tmp"), "f")), "data");
}

TEST(PowerCut, ANewDirectoryNeverFsyncedInItsParentVanishesWithItsContents) {
  FaultyRun r;
  make_dir(r.at("d"));
  write_text(join(r.at("d"), "f"), "data");  // durable inside d, but d itself is not
  r.power_cut();
  EXPECT_FALSE(exists(r.at("d")));
}

// An earlier process made d/e and died before it fsynced their parents: they are there, but
// not durable. make_dirs_durable of a path under them makes them so, whatever it creates.
TEST(PowerCut, MakeDirsDurableMakesDirectoriesAnEarlierCrashLeftUnsyncedDurable) {
  FaultyRun r;
  make_dir(r.at("d"));
  make_dir(join(r.at("d"), "e"));
  make_dirs_durable(join(r.at("d"), "e"));  // all there: creates nothing
  write_text(join(join(r.at("d"), "e"), "f"), "data");
  make_dirs_durable(join(r.at("d"), "g"));  // creates g only
  write_text(join(join(r.at("d"), "g"), "f"), "data");
  r.power_cut();
  EXPECT_EQ(content(join(join(r.at("d"), "e"), "f")), "data");
  EXPECT_EQ(content(join(join(r.at("d"), "g"), "f")), "data");
}

TEST(FaultFileSystem, CrashFreezesEveryLaterCall) {
  FaultPlan plan;
  plan.at = 3;  // create, write, *fsync*
  FaultyRun r(plan);
  Fd fd = open_write_truncate(r.at("a"));
  write_all(fd.get(), "x", 1, r.at("a"));
  EXPECT_THROW(fsync_fd(fd.get(), r.at("a")), IoError);
  EXPECT_TRUE(r.fs().triggered());
  EXPECT_THROW(write_text(r.at("b"), "y"), IoError);
  EXPECT_EQ(r.fs().counted(), 3);
}

TEST(FaultFileSystem, FailsTheNthCallOfAKindWithTheGivenError) {
  FaultPlan plan;
  plan.at = 2;
  plan.op = "write";
  plan.action = "fail";
  plan.error = ENOSPC;
  FaultyRun r(plan);
  write_text(r.at("a"), "first");
  try {
    write_text(r.at("b"), "second");
    FAIL() << "the second write should fail";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), ENOSPC);
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos);
  }
  write_text(r.at("c"), "third");  // not sticky: the disk has room again
  EXPECT_EQ(content(r.at("c")), "third");
}

TEST(FaultFileSystem, StickyFailureKeepsFailing) {
  FaultPlan plan;
  plan.at = 1;
  plan.op = "fsync";
  plan.action = "fail";
  plan.sticky = true;
  FaultyRun r(plan);
  EXPECT_THROW(write_text(r.at("a"), "x"), IoError);
  EXPECT_THROW(write_text(r.at("b"), "y"), IoError);
  EXPECT_FALSE(exists(r.at("a")));  // the failed atomic writes removed their temporary files
  EXPECT_EQ(list_dir(r.run()).size(), 0u);
}

TEST(FaultFileSystem, TornWriteKeepsHalfAndStops) {
  FaultPlan plan;
  plan.at = 2;  // create, *write*
  plan.action = "tear";
  FaultyRun r(plan);
  EXPECT_THROW(write_text(r.at("a"), "abcdefgh"), IoError);
  // The machine "died" during the write: the temporary file holds half the bytes (its removal
  // failed too), and nothing was renamed into place.
  const std::vector<std::string> names = list_dir(r.run());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(content(r.at(names[0])), "abcd");
  EXPECT_FALSE(exists(r.at("a")));
  r.power_cut(CutMode::kKeepWritten);  // its directory entry was never made durable
  EXPECT_EQ(list_dir(r.run()).size(), 0u);
}

TEST(FaultFileSystem, CallsOutsideTheScopeAreNeitherCountedNorJournaled) {
  test::ScratchDir other;
  FaultyRun r;
  write_text(other.file("x"), "outside");
  EXPECT_EQ(r.fs().counted(), 0);
  r.power_cut();
  EXPECT_EQ(content(other.file("x")), "outside");
}

TEST(FaultFileSystem, ParsesTheEnvironmentSyntaxAndRejectsNonsense) {
  const FaultPlan p = parse_fault_plan(
      "scope=/r journal=/j count_under=/r/c start_at=step_2 at=7 action=fail op=fsync "
      "error=ENOSPC sticky=1");
  EXPECT_EQ(p.scope, "/r");
  EXPECT_EQ(p.count_under, "/r/c");
  EXPECT_EQ(p.start_at, "step_2");
  EXPECT_EQ(p.at, 7);
  EXPECT_EQ(p.op, "fsync");
  EXPECT_EQ(p.error, ENOSPC);
  EXPECT_TRUE(p.sticky);
  EXPECT_THROW(parse_fault_plan("scope=/r"), IoError);
  EXPECT_THROW(parse_fault_plan("scope=/r journal=/j action=explode"), IoError);
  EXPECT_THROW(parse_fault_plan("scope=/r journal=/j error=EWHAT"), IoError);
  EXPECT_THROW(parse_fault_plan("scope=/r journal=/j bogus"), IoError);
}

// A plan that journals every call under `run` and injects nothing.
FaultPlan journaling(const std::string& run, const std::string& journal) {
  FaultPlan plan;
  plan.scope = run;
  plan.journal = journal;
  return plan;
}

// Runs `body` in a forked child process with a FaultFileSystem of `plan` installed, as a rank
// of a job runs; returns the child's wait status.
template <typename Body>
int in_child_process(const FaultPlan& plan, Body body) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    FaultFileSystem faulty(plan);
    ScopedFileSystem use(&faulty);
    body();
    ::_exit(0);
  }
  int status = 0;
  return ::waitpid(child, &status, 0) == child ? status : -1;
}

// A real process SIGKILLed by the fault layer mid-save: the journal written by the dead process
// is replayed by another, as the ranks of a job are.
TEST(FaultFileSystem, ARealProcessKilledAtTheNthCallLeavesAReplayableJournal) {
  test::ScratchDir dir;
  const std::string run = dir.file("run"), journal = dir.file("j.log");
  make_dir(run);
  FaultPlan plan = journaling(run, journal);
  plan.at = 9;  // the second write_text's fsync (each one: create write fsync close rename fsync)
  const int status = in_child_process(plan, [&] {
    write_text(join(run, "a"), "first");   // calls 1-6
    write_text(join(run, "a"), "second");  // create (7), write (8), fsync (9): SIGKILL
  });
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  const PowerCutReport rep = apply_power_cut(journal, run);
  EXPECT_EQ(content(join(run, "a")), "first");
  EXPECT_EQ(list_dir(run).size(), 1u) << rep.summary();  // the half-made temporary file is gone
}

// The ranks of a job share one journal, and an "O id" record completes the change "E id": ids
// must not repeat across processes, or one rank's completion is taken for another's (a change
// that was made looks never made, and its undo, durability and renames_made() go wrong).
TEST(FaultFileSystem, ProcessesSharingAJournalNeverReuseARecordId) {
  test::ScratchDir dir;
  const std::string run = dir.file("run"), journal = dir.file("j.log");
  make_dir(run);
  const FaultPlan plan = journaling(run, journal);
  for (const char* name : {"a", "b"}) {
    // Creates a temporary file and renames it: two changes.
    const int status = in_child_process(plan, [&] { write_text(join(run, name), name); });
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  std::vector<std::string> ids;
  std::istringstream lines(read_file(journal));
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> f = split_journal_line(line);
    if (f[0] == "E") ids.push_back(f[1]);
  }
  ASSERT_EQ(ids.size(), 4u) << read_file(journal);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << read_file(journal);
  EXPECT_EQ(renames_made(journal), (std::vector<std::string>{join(run, "a"), join(run, "b")}));
}

}  // namespace
}  // namespace io
}  // namespace rm

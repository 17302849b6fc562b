// The one atomic-write implementation: which calls it makes (the journal of the fault layer
// lists them), and that a failure at any of them leaves the old file and no temporary file.
#include <sys/stat.h>
#include <unistd.h>

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

// The kinds of the counted calls, in order, from the journal's K records.
std::vector<std::string> calls(const std::string& journal) {
  std::vector<std::string> kinds;
  std::string text = read_file(journal);
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const auto f = split_journal_line(text.substr(start, nl - start));
    if (f[0] == "K") kinds.push_back(f[2]);
    start = nl + 1;
  }
  return kinds;
}

TEST(AtomicFile, DurableWriteSyncsTheFileThenRenamesThenSyncsTheDirectory) {
  FaultyRun r;
  write_text(r.at("a"), "x");
  EXPECT_EQ(calls(r.journal()),
            (std::vector<std::string>{"create", "write", "fsync", "close", "rename", "fsync"}));
}

TEST(AtomicFile, VisibleOnlyWriteMakesNoFsync) {
  FaultyRun r;
  write_text(r.at("a"), "x", Durability::kVisibleOnly);
  EXPECT_EQ(calls(r.journal()), (std::vector<std::string>{"create", "write", "close", "rename"}));
}

// Every call of a durable replacement fails once, in turn: the target keeps its old content,
// no temporary file is left, and the error names the failing path and errno.
TEST(AtomicFile, AFailureAtAnyCallLeavesTheOldFileAndNoTemporaryFile) {
  for (int at = 1; at <= 5; ++at) {  // the 6th call (directory fsync) comes after the rename
    SCOPED_TRACE("failing call " + std::to_string(at));
    test::ScratchDir dir;
    const std::string target = dir.file("a");
    write_text(target, "old");
    FaultPlan plan;
    plan.scope = dir.path();
    plan.journal = dir.file("../" + base_name(dir.path()) + ".journal");
    plan.at = at;
    plan.action = "fail";
    plan.error = ENOSPC;
    {
      FaultFileSystem faulty(plan);
      ScopedFileSystem use(&faulty);
      try {
        write_text(target, "new");
        ADD_FAILURE() << "no error";
      } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find(dir.path()), std::string::npos) << e.what();
        EXPECT_EQ(e.error_code(), ENOSPC) << e.what();
      }
    }
    EXPECT_EQ(content(target), "old");
    EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"a"});
    unlink_file(plan.journal);
    remove_tree(plan.journal + ".stash");
  }
}

// A file system that cannot fsync a directory (EINVAL: vboxsf, some 9p and CIFS mounts) takes
// the write, saying once that renames there are not durable (before: every durable write
// failed, so no run could start). Another error of the directory's fsync still fails it.
TEST(AtomicFile, ADirectoryFsyncTheFileSystemDoesNotSupportIsSaidNotFatal) {
  for (const int error : {EINVAL, EIO}) {
    SCOPED_TRACE(std::strerror(error));
    test::ScratchDir dir;
    FaultPlan plan;
    plan.scope = dir.path();
    plan.journal = dir.file("../" + base_name(dir.path()) + ".journal");
    plan.at = 6;  // create, write, fsync, close, rename, then the directory's fsync
    plan.action = "fail";
    plan.error = error;
    bool threw = false;
    testing::internal::CaptureStderr();
    {
      FaultFileSystem faulty(plan);
      ScopedFileSystem use(&faulty);
      try {
        write_text(dir.file("a"), "new");
      } catch (const IoError& e) {
        threw = true;
        EXPECT_EQ(e.error_code(), error);
      }
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(threw, error != EINVAL);
    EXPECT_EQ(content(dir.file("a")), "new");
    if (error == EINVAL) {
      EXPECT_NE(err.find("cannot fsync a directory"), std::string::npos) << err;
    }
    unlink_file(plan.journal);
    remove_tree(plan.journal + ".stash");
  }
}

// A target whose name is legal but within 11 bytes of NAME_MAX: written, through a temporary
// file named otherwise ("<name>.tmp.<pid>" passed 255 bytes: "File name too long").
TEST(AtomicFile, ATargetNameNearTheLimitIsWritten) {
  test::ScratchDir dir;
  const std::string target = dir.file(std::string(250, 'r') + ".html");
  write_text(target, "page");
  EXPECT_EQ(content(target), "page");
  EXPECT_EQ(list_dir(dir.path()).size(), 1u);
}

// Something already at the temporary name -- a symlink planted there, or a stale file of a
// dead process whose pid came round again -- is replaced, never written through: a symlink to
// another file had that file truncated and overwritten, and the target became the link.
TEST(AtomicFile, AnythingAtTheTemporaryNameIsReplacedNotWrittenThrough) {
  test::ScratchDir dir;
  const std::string precious = dir.file("precious"), target = dir.file("f");
  write_text(precious, "keep me");
  const std::string tmp = target + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(precious.c_str(), tmp.c_str()), 0);
  write_text(target, "new\n");
  EXPECT_EQ(content(precious), "keep me");
  EXPECT_EQ(content(target), "new\n");
  struct stat st;
  ASSERT_EQ(::lstat(target.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the target is no longer a regular file";
  EXPECT_FALSE(exists(tmp));
  write_text(tmp, "stale");  // a stale temporary file: replaced as well
  write_text(target, "newer");
  EXPECT_EQ(content(target), "newer");
}

TEST(AtomicFile, AppendAfterAFailureIsRefused) {
  FaultPlan plan;
  plan.at = 2;
  plan.action = "fail";
  FaultyRun r(plan);
  AtomicFileWriter w(r.at("a"));
  EXPECT_THROW(w.append("x", 1), IoError);
  EXPECT_THROW(w.append("y", 1), IoError);
  EXPECT_THROW(w.commit(), IoError);
  EXPECT_FALSE(exists(r.at("a")));
}

}  // namespace
}  // namespace io
}  // namespace rm

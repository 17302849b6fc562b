// A session base of its own for every mpirun (mpi_session_dir.h): where the bases go, that
// mpirun is given its base, and that the sweeps remove only the bases of ended launches.
#include "launcher/mpi_session_dir.h"

#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "launcher/mpi_launch.h"
#include "testing/scoped_env.h"
#include "testing/temp_dir.h"

namespace rm {
namespace {

namespace fs = std::filesystem;

using testutil::ScopedEnv;

// A directory last changed `seconds` ago.
void age(const std::string& path, int seconds) {
  const timeval then{std::time(nullptr) - seconds, 0};
  const timeval times[2] = {then, then};
  ASSERT_EQ(::utimes(path.c_str(), times), 0) << path;
}

TEST(MpiSessionBase, EachLaunchGetsItsOwnUnderTheUsersParentInTmpdir) {
  TempDir dir;
  ScopedEnv tmp("TMPDIR", dir.path());
  ::unsetenv("OMPI_MCA_orte_tmpdir_base");
  const std::string parent = mpi_session_parent();
  EXPECT_EQ(parent, dir.path() + "/rm-mpi." + std::to_string(::geteuid()));
  const std::string a = new_mpi_session_base(), b = new_mpi_session_base();
  EXPECT_NE(a, b);
  for (const std::string& base : {a, b}) {
    EXPECT_EQ(fs::path(base).parent_path().string(), parent) << base;
    EXPECT_EQ(base.find(std::to_string(::getpid()) + "."), parent.size() + 1) << base;
  }
}

TEST(MpiSessionBase, TheUsersOwnChoiceIsKept) {
  ScopedEnv theirs("OMPI_MCA_orte_tmpdir_base", "/scratch/mine");
  EXPECT_EQ(new_mpi_session_base(), "");
}

TEST(MpiSessionBase, MpirunIsGivenItsBaseOnTheCommandLine) {
  MpiLaunch launch;
  launch.nproc = 2;
  launch.session_base = "/tmp/rm-mpi.0/123.4";
  const std::vector<std::string> argv = mpirun_command(launch, {"run", "job.yaml"});
  const auto mca = std::find(argv.begin(), argv.end(), "--mca");
  ASSERT_NE(mca, argv.end());
  ASSERT_LT(mca + 2, argv.end());
  EXPECT_EQ(*(mca + 1), "orte_tmpdir_base");
  EXPECT_EQ(*(mca + 2), "/tmp/rm-mpi.0/123.4");
  // Before the program: mpirun's own option, not an argument of the ranks.
  EXPECT_LT(mca - argv.begin(), std::find(argv.begin(), argv.end(), "run") - argv.begin() - 1);

  launch.session_base.clear();
  const std::vector<std::string> plain = mpirun_command(launch, {"run", "job.yaml"});
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "orte_tmpdir_base"), plain.end());
}

TEST(MpiSessionBase, SweepRemovesOnlyEmptyBasesOfEndedLaunches) {
  TempDir dir;
  const std::string parent = dir.file("rm-mpi.0");
  for (const char* name : {"1.1", "1.2", "2.1"}) fs::create_directories(parent + "/" + name);
  std::ofstream(parent + "/1.2/ompi.h0.0").put('x');  // a live launch's base: not empty
  std::ofstream(parent + "/stray-file").put('x');
  age(parent + "/1.1", 120);  // ended two minutes ago
  age(parent + "/1.2", 120);
  age(parent + "/stray-file", 120);
  // 2.1: emptied just now -- or a launch whose daemon is about to create its directory inside.

  EXPECT_EQ(sweep_mpi_session_bases(parent, 60), 1);
  EXPECT_FALSE(fs::exists(parent + "/1.1"));
  EXPECT_TRUE(fs::exists(parent + "/1.2/ompi.h0.0"));
  EXPECT_TRUE(fs::exists(parent + "/2.1"));
  EXPECT_TRUE(fs::exists(parent + "/stray-file"));
  EXPECT_EQ(sweep_mpi_session_bases(dir.file("absent"), 60), 0);
}

TEST(MpiSessionBase, RemoveTakesWhatAKilledLaunchLeftInside) {
  TempDir dir;
  const std::string base = dir.file("rm-mpi.0/7.1");
  fs::create_directories(base + "/ompi.h0.0/pid.99/0");
  remove_mpi_session_base(base);
  EXPECT_FALSE(fs::exists(base));
  EXPECT_TRUE(fs::exists(dir.file("rm-mpi.0")));
  remove_mpi_session_base("");  // no base (the user's own): nothing to do, nothing thrown
}

// A base a killed launcher left (its supervisor and mpirun gone, 8 MiB inside) is removed by a
// later launch on its host; one whose launcher or mpirun lives, one made on another host, and a
// young one are kept.
TEST(MpiSessionBase, AKilledLaunchersBaseIsRemovedOnItsHostOnly) {
  TempDir dir;
  const std::string parent = dir.file("rm-mpi.0");
  // This host, boot and pid namespace, as a launcher here marks its base.
  std::string host;
  {
    ScopedEnv tmp("TMPDIR", dir.path());
    ::unsetenv("OMPI_MCA_orte_tmpdir_base");
    const std::string base = new_mpi_session_base();
    std::getline(std::ifstream(base + ".launcher"), host);
    remove_mpi_session_base(base);
  }
  ASSERT_FALSE(host.empty());
  // A pid no process has: past the kernel's largest.
  const std::string dead = "4194305", alive = std::to_string(::getpid());
  struct Base {
    std::string name, host, mpirun;
    bool removed;
  };
  const Base bases[] = {{dead + ".1", host, dead, true},
                        {alive + ".1", host, dead, false},        // the launcher lives
                        {dead + ".2", host, alive, false},        // its mpirun lives
                        {dead + ".3", "elsewhere", dead, false},  // another host's
                        // this host's name, another pid namespace's (a container sharing /tmp)
                        {dead + ".4", host.substr(0, host.rfind(' ')) + " pid:[1]", dead, false}};
  for (const Base& b : bases) {
    fs::create_directories(parent + "/" + b.name + "/ompi.h.0/pid." + b.mpirun + "/0");
    std::ofstream(parent + "/" + b.name + ".launcher") << b.host << "\n";
    age(parent + "/" + b.name + ".launcher", 120);
  }
  EXPECT_EQ(sweep_killed_launch_bases(parent, 60), 1);
  for (const Base& b : bases) {
    EXPECT_EQ(fs::exists(parent + "/" + b.name), !b.removed) << b.name;
    EXPECT_EQ(fs::exists(parent + "/" + b.name + ".launcher"), !b.removed) << b.name;
  }
  // Young: a launch that is starting (its mpirun not yet there).
  fs::create_directories(parent + "/" + dead + ".9");
  std::ofstream(parent + "/" + dead + ".9.launcher") << host << "\n";
  EXPECT_EQ(sweep_killed_launch_bases(parent, 60), 0);
}

// A rank sweeps its launch's parent when it is the first on its host and the parent is ours.
TEST(MpiSessionBase, RanksSweepOnlyOurParentAndOnlyTheFirstOnAHost) {
  TempDir dir;
  const std::string ours = dir.file("rm-mpi.0"), theirs = dir.file("scratch");
  for (const std::string& parent : {ours, theirs}) {
    fs::create_directories(parent + "/ended");
    age(parent + "/ended", 120);
  }
  {
    ScopedEnv base("OMPI_MCA_orte_tmpdir_base", ours + "/5.1");
    ScopedEnv second("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    sweep_mpi_session_bases_from_rank();
    EXPECT_TRUE(fs::exists(ours + "/ended")) << "only local rank 0 sweeps";
  }
  {
    ScopedEnv base("OMPI_MCA_orte_tmpdir_base", theirs + "/5.1");
    ScopedEnv first("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    sweep_mpi_session_bases_from_rank();
    EXPECT_TRUE(fs::exists(theirs + "/ended")) << "a base the user chose is not ours to sweep";
  }
  {
    ScopedEnv base("OMPI_MCA_orte_tmpdir_base", ours + "/5.1");
    ScopedEnv first("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    sweep_mpi_session_bases_from_rank();
    EXPECT_FALSE(fs::exists(ours + "/ended"));
  }
}

}  // namespace
}  // namespace rm

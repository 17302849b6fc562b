// The watchdog with an injected on_fire (to observe the line instead of exiting) and a fake
// communicator (to stage the collective it waits for and the peers' liveness); the default
// on_fire in a death test; and CommActivity's snapshot under a concurrent writer.
#include "worker/watchdog.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/io_progress.h"
#include "collectives/self_communicator.h"

namespace rm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Collects the line of a watchdog's on_fire, and when it came.
class Fired {
 public:
  std::function<void(const std::string&)> hook() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      line_ = line;
      at_ = Clock::now();
      ++count_;
      cv_.notify_all();
    };
  }
  // Waits up to `limit` for the line; false if it did not come.
  bool wait(Clock::duration limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return count_ > 0; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  std::string line() {
    std::lock_guard<std::mutex> lock(mu_);
    return line_;
  }
  Clock::time_point at() {
    std::lock_guard<std::mutex> lock(mu_);
    return at_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string line_;
  Clock::time_point at_;
  int count_ = 0;
};

// Rank 0 of 2, doing nothing but publishing the activity and liveness a test stages.
class FakeComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  std::unique_ptr<Work> all_reduce(void*, size_t, DType, ReduceOp) override { return none(); }
  std::unique_ptr<Work> reduce_scatter(void*, const std::vector<size_t>&, DType,
                                       ReduceOp) override {
    return none();
  }
  std::unique_ptr<Work> all_gather(void*, const std::vector<size_t>&, DType) override {
    return none();
  }
  std::unique_ptr<Work> broadcast(void*, size_t, DType, int) override { return none(); }
  void barrier() override {}
  void progress() override {}
  [[noreturn]] void abort(const std::string& why, int = 1) override { throw std::logic_error(why); }
  uint64_t share_liveness(uint64_t) override { return peers.load(); }

  CommActivity& activity_for_test() { return activity_; }
  std::atomic<uint64_t> peers{0};

 private:
  static std::unique_ptr<Work> none() { throw std::logic_error("FakeComm: no collectives"); }
};

WatchdogOptions options(double timeout_s, Fired& fired) {
  WatchdogOptions o;
  o.timeout_s = timeout_s;
  o.on_fire = fired.hook();
  return o;
}

TEST(Watchdog, FiresAfterTheTimeoutWithoutBeats) {
  auto comm = make_self_communicator();
  StepProgress steps;
  steps.enter(Phase::kForward, 7);
  Fired fired;
  const auto t0 = Clock::now();
  Watchdog watchdog(steps, *comm, options(0.4, fired));
  ASSERT_TRUE(fired.wait(std::chrono::seconds(5)));
  const double after = std::chrono::duration<double>(fired.at() - t0).count();
  EXPECT_GE(after, 0.4);
  EXPECT_LT(after, 3.0);  // its check interval, and a loaded machine's (TSan's) delays
  // "0.4 s", or a little more on a loaded machine.
  EXPECT_EQ(fired.line().rfind("ringmaster: [rank 0/1] watchdog: no progress for 0.", 0), 0u)
      << fired.line();
  EXPECT_NE(fired.line().find(" s (resilience.step_timeout_s) in step 7, phase forward, not in "
                              "a collective; aborting the job"),
            std::string::npos)
      << fired.line();
  EXPECT_EQ(fired.line().find('\n'), std::string::npos);  // one line
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(fired.count(), 1);  // once: it stops watching after firing
}

// Beats of one kind, each faster than the timeout, for over two timeouts: no fire. Then none:
// it fires, one timeout after the last beat. Each kind alone must keep it quiet (a sum that
// dropped one would fire on a rank doing only that). The three kinds that a watchdog's own
// objects carry run at once, a watchdog each; the checkpoint I/O beats, counted process-wide,
// alone after them. The timeout leaves 1.4 s of slack over the beats' 0.1 s, for a loaded
// machine (TSan runs this) that oversleeps.
struct Watched {
  FakeComm comm;
  StepProgress steps;
  Fired fired;
  std::unique_ptr<Watchdog> watchdog;
  Clock::time_point last_beat;
};

TEST(Watchdog, EachKindOfBeatAloneKeepsItQuiet) {
  enum Kind { kStepBeat, kPhaseChange, kCollectiveProgress, kCheckpointIo };
  const char* names[] = {"a unit of forward", "a phase change", "a collective moved",
                         "a checkpoint chunk"};
  for (const std::vector<Kind>& together :
       {std::vector<Kind>{kStepBeat, kPhaseChange, kCollectiveProgress},
        std::vector<Kind>{kCheckpointIo}}) {
    std::vector<std::unique_ptr<Watched>> w;
    for (size_t i = 0; i < together.size(); ++i) {
      w.push_back(std::make_unique<Watched>());
      w.back()->steps.enter(Phase::kForward, 3);
      w.back()->watchdog = std::make_unique<Watchdog>(w.back()->steps, w.back()->comm,
                                                      options(1.5, w.back()->fired));
    }
    const auto t0 = Clock::now();
    for (int i = 0; seconds_since(t0) < 3.5; ++i) {
      for (size_t k = 0; k < together.size(); ++k) {
        Watched& x = *w[k];
        x.last_beat = Clock::now();
        switch (together[k]) {
          case kStepBeat:
            x.steps.beat();
            break;
          case kPhaseChange:
            x.steps.enter(i % 2 ? Phase::kBackward : Phase::kForward);
            break;
          case kCollectiveProgress:
            x.comm.activity_for_test().note_progress();
            break;
          case kCheckpointIo:
            note_io_progress();
            break;
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    for (size_t k = 0; k < together.size(); ++k) {  // all before any wait below
      EXPECT_EQ(w[k]->fired.count(), 0) << names[together[k]] << ": " << w[k]->fired.line();
    }
    for (size_t k = 0; k < together.size(); ++k) {
      Watched& x = *w[k];
      ASSERT_TRUE(x.fired.wait(std::chrono::seconds(5))) << names[together[k]];
      EXPECT_GE(std::chrono::duration<double>(x.fired.at() - x.last_beat).count(), 1.5)
          << names[together[k]];
      EXPECT_NE(x.fired.line().find("in step 3, phase "), std::string::npos) << x.fired.line();
    }
  }
}

// The collective it waits for: name, sequence number, bytes, age and the rank that is behind.
TEST(Watchdog, ReportsTheCollectiveItWaitsFor) {
  FakeComm comm;
  StepProgress steps;
  steps.enter(Phase::kGradientSync, 12);
  const OpStamp op = stamp_op(37, "all_reduce", 87936, 60);
  comm.activity_for_test().set_oldest(&op);
  comm.activity_for_test().set_blocked(true);
  comm.activity_for_test().set_peer(1);
  Fired fired;
  Watchdog watchdog(steps, comm, options(0.3, fired));
  ASSERT_TRUE(fired.wait(std::chrono::seconds(5)));
  const std::string line = fired.line();
  EXPECT_EQ(line.rfind("ringmaster: [rank 0/2] watchdog: no progress for ", 0), 0u) << line;
  EXPECT_NE(line.find(" s (resilience.step_timeout_s) in step 12, phase gradient sync, waiting "
                      "for all_reduce(seq=37, bytes=87936) issued "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" s ago (rank 1 is behind); aborting the job"), std::string::npos) << line;
}

// An operation in flight while the rank computes is named as such, not as a wait.
TEST(Watchdog, NamesAnOperationInFlightWhileNotWaiting) {
  FakeComm comm;
  StepProgress steps;
  steps.enter(Phase::kBackward, 2);
  const OpStamp op = stamp_op(5, "reduce_scatter", 1024, 60);
  comm.activity_for_test().set_oldest(&op);
  Fired fired;
  Watchdog watchdog(steps, comm, options(0.2, fired));
  ASSERT_TRUE(fired.wait(std::chrono::seconds(5)));
  EXPECT_NE(fired.line().find("phase backward, not waiting in a collective "
                              "(reduce_scatter(seq=5, bytes=1024) issued "),
            std::string::npos)
      << fired.line();
}

// A peer on the node that makes progress keeps a waiting rank alive; once it stops, the rank
// fires (the timeout, as above, far above the peer's 80 ms period).
TEST(Watchdog, PeerProgressCounts) {
  FakeComm comm;
  StepProgress steps;
  steps.enter(Phase::kForward, 4);
  const OpStamp op = stamp_op(9, "all_reduce", 16, 60);
  comm.activity_for_test().set_oldest(&op);
  comm.activity_for_test().set_blocked(true);
  Fired fired;
  Watchdog watchdog(steps, comm, options(1.5, fired));
  const auto t0 = Clock::now();
  while (seconds_since(t0) < 3.5) {
    comm.peers.fetch_add(1);
    std::this_thread::sleep_for(milliseconds(80));
  }
  EXPECT_EQ(fired.count(), 0) << fired.line();
  ASSERT_TRUE(fired.wait(std::chrono::seconds(5)));
  EXPECT_NE(fired.line().find("waiting for all_reduce(seq=9, bytes=16)"), std::string::npos)
      << fired.line();
}

// A rank with two communicators (cuda: NCCL, which shares no liveness, beside MPI for the host's
// collectives): waiting in the host one for a peer that is busy but healthy -- its node's
// liveness moving there -- does not fire; the host communicator's own progress counts too; and
// when it fires, the line names the host operation it waits for, not NCCL's idle one.
TEST(Watchdog, TheHostCommunicatorCountsBesideTheDevicesOne) {
  FakeComm nccl, host;
  StepProgress steps;
  steps.enter(Phase::kCheckpointSave, 6);
  const OpStamp op = stamp_op(4, "gather", 4096, 60);
  host.activity_for_test().set_oldest(&op);
  host.activity_for_test().set_blocked(true);
  host.activity_for_test().set_peer(0);
  Fired fired;
  WatchdogOptions o = options(1.5, fired);
  o.host = &host;
  Watchdog watchdog(steps, nccl, std::move(o));
  const auto t0 = Clock::now();
  for (int i = 0; seconds_since(t0) < 3.5; ++i) {
    if (i % 2 == 0) host.peers.fetch_add(1);                   // the busy peer's liveness
    if (i % 2 == 1) host.activity_for_test().note_progress();  // a host collective moved
    std::this_thread::sleep_for(milliseconds(80));
  }
  EXPECT_EQ(fired.count(), 0) << fired.line();
  ASSERT_TRUE(fired.wait(std::chrono::seconds(5)));
  EXPECT_NE(fired.line().find("waiting for gather(seq=4, bytes=4096) issued "), std::string::npos)
      << fired.line();
  EXPECT_NE(fired.line().find("(rank 0 is behind)"), std::string::npos) << fired.line();
}

// In a checkpoint phase the line names the checkpoint I/O last begun.
TEST(Watchdog, CheckpointPhasesNameTheirIo) {
  auto comm = make_self_communicator();
  StepProgress steps;
  steps.enter(Phase::kCheckpointSave, 20);
  set_io_activity("shard:collect (waiting for the other ranks' shards)");
  Fired fired;
  Watchdog watchdog(steps, *comm, options(0.2, fired));
  ASSERT_TRUE(fired.wait(std::chrono::seconds(5)));
  EXPECT_NE(fired.line().find("in step 20, phase checkpoint save (checkpoint I/O: shard:collect "
                              "(waiting for the other ranks' shards)), not in a collective"),
            std::string::npos)
      << fired.line();
}

TEST(Watchdog, StopsPromptlyAndNeverFiresAfterDestruction) {
  auto comm = make_self_communicator();
  StepProgress steps;
  Fired fired;
  const auto t0 = Clock::now();
  { Watchdog watchdog(steps, *comm, options(0.2, fired)); }
  EXPECT_LT(seconds_since(t0), 0.5);  // woken at once, not after a timeout
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(fired.count(), 0);
}

TEST(Watchdog, OffMeansNoWatchdog) {
  auto comm = make_self_communicator();
  StepProgress steps;
  JobConfig job;
  EXPECT_EQ(job.resilience.step_timeout_s, 0);
  EXPECT_EQ(Watchdog::start(job, steps, *comm), nullptr);
  job.resilience.step_timeout_s = 30;
  EXPECT_NE(Watchdog::start(job, steps, *comm), nullptr);
}

// A whole process stopped (SIGSTOP, Ctrl-Z, a suspended Slurm job) and continued is not stuck:
// its watchdog starts the clock again. The child beats whenever the parent writes a byte.
TEST(Watchdog, ProcessStoppedAndContinuedStartsTheClockAgain) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[1]);
    auto comm = make_self_communicator();
    StepProgress steps;
    steps.enter(Phase::kForward, 1);
    WatchdogOptions o;
    o.timeout_s = 1;  // the default on_fire: exit code 1
    {
      Watchdog watchdog(steps, *comm, o);
      char c;
      while (::read(pipe_fds[0], &c, 1) == 1) steps.beat();
    }
    ::_exit(0);
  }
  ::close(pipe_fds[0]);
  auto beat_for = [&](double s) {
    for (const auto t0 = Clock::now(); seconds_since(t0) < s;) {
      ASSERT_EQ(::write(pipe_fds[1], "b", 1), 1);
      std::this_thread::sleep_for(milliseconds(200));
    }
  };
  beat_for(1);
  ::kill(child, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // three timeouts
  ::kill(child, SIGCONT);
  std::this_thread::sleep_for(milliseconds(300));  // its watchdog polls before the next beat
  beat_for(1);
  ::close(pipe_fds[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// The default on_fire: the line on stderr, stdout flushed first, exit code 1 (kExitFailure).
TEST(WatchdogDeathTest, DefaultPrintsFlushesAndExitsWithFailure) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto comm = make_self_communicator();
        StepProgress steps;
        steps.enter(Phase::kData, 5);
        std::printf("logged before the stall\n");  // buffered: stdout is not a terminal here
        WatchdogOptions o;
        o.timeout_s = 0.2;
        Watchdog watchdog(steps, *comm, o);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        std::exit(0);
      },
      ::testing::ExitedWithCode(1),
      "watchdog: no progress for 0\\.2 s \\(resilience\\.step_timeout_s\\) in step 5, phase "
      "data, not in a collective; aborting the job");
}

// CommActivity's seqlock: a reader never sees the fields of two operations mixed. The writer
// makes a bounded number of writes and the reader reads until it is done, so that neither one's
// share of a loaded machine's cores decides the outcome.
TEST(CommActivity, SnapshotIsConsistentUnderAConcurrentWriter) {
  FakeComm comm;
  CommActivity& a = comm.activity_for_test();
  const OpStamp ops[2] = {stamp_op(1, "all_reduce", 100, 60), stamp_op(2, "all_gather", 200, 60)};
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    for (uint64_t i = 0; i < 300000; ++i) {
      a.set_oldest(i % 3 == 2 ? nullptr : &ops[i % 3]);
      if (i % 64 == 0) std::this_thread::yield();
    }
    writing.store(false);
  });
  int seen[3] = {0, 0, 0}, mixed = 0;
  do {  // at least once, should the writer be done before this thread runs
    const CommActivity::Snapshot s = comm.activity().snapshot();
    if (s.seq == 0) {
      mixed += std::string(s.name) != "" || s.bytes != 0;
      ++seen[2];
    } else if (s.seq <= 2) {
      const OpStamp& op = ops[s.seq - 1];
      mixed += std::string(s.name) != op.name || s.bytes != op.bytes || s.issued != op.issued;
      ++seen[s.seq - 1];
    } else {
      ++mixed;
    }
  } while (writing.load());
  writer.join();
  EXPECT_EQ(mixed, 0);
  EXPECT_GT(seen[0] + seen[1] + seen[2], 0);
}

}  // namespace
}  // namespace rm

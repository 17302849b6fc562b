// The async writer: save() returns at once and wait_staged() after the copy, overlapping saves wait for each other,
// errors from the thread come back on the next call, several ranks commit without a collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "checkpoint/async_writer.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"
#include "io/posix_io.h"

namespace rm {
namespace {

using testutil::buffer_at;

constexpr uint64_t kN = 30011;

// One rank's request for `step`: its uneven slice of every buffer in `data`.
SaveRequest request(const std::string& run_dir, int64_t step, int rank, int world,
                    const std::vector<std::vector<float>>& data) {
  SaveRequest req;
  req.run_dir = run_dir;
  req.step = step;
  req.rank = rank;
  const auto slice = testutil::uneven_split(kN, world)[rank];
  for (size_t b = 0; b < data.size(); ++b) {
    req.slices.push_back(ShardSlice{testutil::buffer_names()[b], slice.first, slice.second,
                                    data[b].data() + slice.first});
  }
  if (rank == 0) {
    req.commit = true;
    req.writers = world;
    req.manifest = testutil::manifest_template(step, world, kN);
    req.collect_timeout_s = 30;
  }
  return req;
}

std::vector<std::vector<float>> data_at(int64_t step) {
  std::vector<std::vector<float>> data;
  for (int b = 0; b < 3; ++b) data.push_back(buffer_at(step, b, kN));
  return data;
}

void expect_checkpoint(const std::string& run_dir, int64_t step) {
  const std::string ckpt = checkpoint_path(run_dir, step);
  const VerifyResult v = verify_checkpoint(ckpt);
  ASSERT_TRUE(v.ok) << v.error;
  CheckpointReader reader(ckpt);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(reader.read_buffer(testutil::buffer_names()[b]), buffer_at(step, b, kN));
  }
}

TEST(AsyncWriter, SaveCopiesSoTheCallerMayOverwriteOnceStaged) {
  TempDir dir;
  auto data = data_at(5);
  AsyncCheckpointWriter writer;
  writer.save(request(dir.path(), 5, 0, 1, data));
  writer.wait_staged();
  for (auto& buf : data) std::fill(buf.begin(), buf.end(), -1.0f);  // training goes on
  const SaveResult r = writer.wait();
  EXPECT_EQ(r.step, 5);
  EXPECT_EQ(r.committed_path, checkpoint_path(dir.path(), 5));
  EXPECT_EQ(r.shard.name, "shard_00000.bin");
  expect_checkpoint(dir.path(), 5);
}

// The point of kAsync: the caller goes on while the shard is written. The write is held at its
// first phase ("shard:write", a phase hook blocking on a latch) and save() and wait_staged() must
// both return meanwhile, the writer not idle; released, the checkpoint is the saved data.
std::mutex g_gate_mutex;
std::condition_variable g_gate_cv;
bool g_gate_reached = false, g_gate_open = false;
void hold_at_shard_write(const char* phase) {
  if (std::string(phase) != "shard:write") return;
  std::unique_lock<std::mutex> lock(g_gate_mutex);
  g_gate_reached = true;
  g_gate_cv.notify_all();
  g_gate_cv.wait(lock, [] { return g_gate_open; });
}

TEST(AsyncWriter, SaveAndWaitStagedReturnWhileTheShardIsStillBeingWritten) {
  TempDir dir;
  auto data = data_at(6);
  g_gate_reached = g_gate_open = false;
  add_checkpoint_phase_hook(hold_at_shard_write);
  AsyncCheckpointWriter writer;
  // On a thread of its own, so that a writer that blocks here fails the test instead of hanging.
  std::promise<void> returned;
  std::thread caller([&] {
    writer.save(request(dir.path(), 6, 0, 1, data));
    writer.wait_staged();
    returned.set_value();
  });
  const bool staged =
      returned.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  {
    std::unique_lock<std::mutex> lock(g_gate_mutex);
    const bool reached =
        g_gate_cv.wait_for(lock, std::chrono::seconds(30), [] { return g_gate_reached; });
    EXPECT_TRUE(reached) << "the write never began";
    EXPECT_TRUE(staged) << "save() or wait_staged() waited for the write";
    EXPECT_FALSE(writer.idle()) << "the write is held: the save is in flight";
    g_gate_open = true;  // the write goes on
    g_gate_cv.notify_all();
  }
  caller.join();
  for (auto& buf : data) std::fill(buf.begin(), buf.end(), -1.0f);  // training went on
  EXPECT_EQ(writer.wait().step, 6);
  remove_checkpoint_phase_hook(hold_at_shard_write);
  expect_checkpoint(dir.path(), 6);
}

// A GPU save hands over pinned buffers whose download is still in flight: `ready` waits for it.
// Here it is the "download" itself, run late on purpose: what gets written is what it delivers,
// never the stale bytes the slices held when save() returned, in both modes.
TEST(AsyncWriter, ReadyRunsBeforeTheSlicesAreRead) {
  for (auto mode : {AsyncCheckpointWriter::Mode::kAsync, AsyncCheckpointWriter::Mode::kSync}) {
    TempDir dir;
    auto data = data_at(9);  // what the device holds
    std::vector<std::vector<float>> pinned(3, std::vector<float>(kN, -7.0f));  // stale
    SaveRequest req = request(dir.path(), 9, 0, 1, pinned);
    std::thread::id ready_thread;
    req.ready = [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the copy engine is busy
      for (int b = 0; b < 3; ++b) std::copy(data[b].begin(), data[b].end(), pinned[b].begin());
      ready_thread = std::this_thread::get_id();
    };
    AsyncCheckpointWriter writer(mode);
    writer.save(req);
    writer.wait_staged();
    EXPECT_EQ(writer.wait().step, 9);
    expect_checkpoint(dir.path(), 9);
    if (mode == AsyncCheckpointWriter::Mode::kAsync) {
      EXPECT_NE(ready_thread, std::this_thread::get_id()) << "must not block the caller";
    }
  }
}

TEST(AsyncWriter, FailedReadyWritesNothingAndIsRethrown) {
  TempDir dir;
  auto data = data_at(3);
  SaveRequest req = request(dir.path(), 3, 0, 1, data);
  req.ready = [] { throw CheckpointError("download failed: an illegal memory access"); };
  AsyncCheckpointWriter writer;
  writer.save(req);
  writer.wait_staged();  // returns: the failure is reported by wait()
  EXPECT_THROW(writer.wait(), CheckpointError);
  EXPECT_FALSE(verify_checkpoint(checkpoint_path(dir.path(), 3)).ok);
  req.ready = nullptr;
  writer.save(req);  // the writer works again
  writer.wait();
  expect_checkpoint(dir.path(), 3);
}

TEST(AsyncWriter, OverlappingSavesWaitForThePreviousOne) {
  TempDir dir;
  AsyncCheckpointWriter writer;
  writer.reserve(3 * kN);
  for (int64_t step = 1; step <= 4; ++step) {
    auto data = data_at(step);
    writer.save(request(dir.path(), step, 0, 1, data));  // waits for step - 1 first
    writer.wait_staged();  // before `data` goes
  }
  EXPECT_EQ(writer.wait().step, 4);
  EXPECT_TRUE(writer.idle());
  for (int64_t step = 1; step <= 4; ++step) expect_checkpoint(dir.path(), step);
}

TEST(AsyncWriter, RetentionRunsAfterCommit) {
  TempDir dir;
  AsyncCheckpointWriter writer;
  for (int64_t step = 1; step <= 4; ++step) {
    auto data = data_at(step);
    SaveRequest req = request(dir.path(), step, 0, 1, data);
    req.keep = 2;
    writer.save(req);
    writer.wait_staged();  // before `data` goes
  }
  const SaveResult last = writer.wait();
  EXPECT_EQ(last.removed, std::vector<std::string>{checkpoint_path(dir.path(), 2)});
  const auto list = list_checkpoints(dir.path());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].step, 3);
  EXPECT_EQ(list[1].step, 4);
}

TEST(AsyncWriter, ErrorIsRethrownOnTheNextCallThenTheWriterWorksAgain) {
  TempDir dir;
  std::ofstream(dir.file("not_a_dir")) << "a regular file";
  auto data = data_at(1);
  AsyncCheckpointWriter writer;
  writer.save(request(dir.file("not_a_dir/run"), 1, 0, 1, data));  // fails on the thread
  try {
    writer.wait();
    FAIL() << "the error was lost";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("not_a_dir"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
  writer.wait();  // reported once
  writer.save(request(dir.file("not_a_dir/run"), 1, 0, 1, data));
  auto data2 = data_at(2);
  EXPECT_THROW(writer.save(request(dir.path(), 2, 0, 1, data2)), IoError);  // next call
  writer.save(request(dir.path(), 2, 0, 1, data2));
  writer.wait();
  expect_checkpoint(dir.path(), 2);
}

TEST(AsyncWriter, SyncModeThrowsFromSave) {
  TempDir dir;
  std::ofstream(dir.file("not_a_dir")) << "a regular file";
  auto data = data_at(1);
  AsyncCheckpointWriter writer(AsyncCheckpointWriter::Mode::kSync);
  EXPECT_THROW(writer.save(request(dir.file("not_a_dir/run"), 1, 0, 1, data)), IoError);
  writer.save(request(dir.path(), 1, 0, 1, data));
  EXPECT_EQ(writer.wait().committed_path, checkpoint_path(dir.path(), 1));
  expect_checkpoint(dir.path(), 1);
}

TEST(AsyncWriter, ThreeRanksCommitWithoutACollective) {
  // One writer per "rank", each used from its own thread, as in three processes.
  for (const auto mode :
       {AsyncCheckpointWriter::Mode::kAsync, AsyncCheckpointWriter::Mode::kSync}) {
    TempDir dir;
    auto data = data_at(12);
    std::vector<std::thread> ranks;
    std::vector<std::string> errors(3);
    for (int r = 0; r < 3; ++r) {
      ranks.emplace_back([&, r] {
        try {
          AsyncCheckpointWriter writer(mode);
          writer.save(request(dir.path(), 12, r, 3, data));
          writer.wait();
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (const auto& e : errors) EXPECT_EQ(e, "");
    expect_checkpoint(dir.path(), 12);
    EXPECT_EQ(load_manifest(checkpoint_path(dir.path(), 12)).files.size(), 3u);
  }
}

TEST(AsyncWriter, CommitGivesUpWhenARankNeverWrites) {
  TempDir dir;
  auto data = data_at(3);
  AsyncCheckpointWriter writer;
  SaveRequest req = request(dir.path(), 3, 0, 2, data);  // rank 1 never saves
  req.collect_timeout_s = 0.2;
  writer.save(req);
  try {
    writer.wait();
    FAIL() << "committed without rank 1";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(io::exists(checkpoint_path(dir.path(), 3)));
  EXPECT_FALSE(find_resume_checkpoint(dir.path()));
}

// The committing rank's failed save removes its own scratch and that of earlier steps (a rank
// that wrote its shard after rank 0 had given up on that step left it: with
// checkpoint.on_error: continue on a full disk, one a failed save), and leaves the scratch of a
// later step, which another rank may be writing, and the committed checkpoints.
TEST(AsyncWriter, AFailedCommitRemovesTheScratchOfItsStepAndOfEarlierOnes) {
  TempDir dir;
  auto data1 = data_at(1), data = data_at(4);
  AsyncCheckpointWriter writer(AsyncCheckpointWriter::Mode::kSync);
  writer.save(request(dir.path(), 1, 0, 1, data1));  // committed: stays
  const std::string late = checkpoint_tmp_path(dir.path(), 2);
  io::make_dirs_durable(late);
  std::ofstream(io::join(late, shard_file_name(1))) << "rank 1's shard, written too late";
  std::ofstream(io::join(late, shard_descriptor_name(1))) << "{}";
  const std::string later = checkpoint_tmp_path(dir.path(), 6);
  io::make_dirs_durable(later);
  std::ofstream(io::join(later, shard_file_name(1))) << "rank 1, saving ahead";
  // Rank 1 failed its shard of step 4 (its marker): rank 0's save of step 4 fails.
  io::make_dirs_durable(checkpoint_tmp_path(dir.path(), 4));
  std::ofstream(io::join(checkpoint_tmp_path(dir.path(), 4), shard_failure_name(1)));
  EXPECT_THROW(writer.save(request(dir.path(), 4, 0, 2, data)), IoError);
  EXPECT_FALSE(io::exists(late));
  EXPECT_FALSE(io::exists(checkpoint_tmp_path(dir.path(), 4)));
  EXPECT_TRUE(io::exists(io::join(later, shard_file_name(1))));
  expect_checkpoint(dir.path(), 1);
}

// A failure marker left in step_N.tmp by a late failing save of step N (after the committing
// rank had cleaned up) does not fail a later save of that step (a NaN rollback's replay): the
// rank's own shard replaces it (before: rank 0 failed the save, blaming rank 1).
TEST(AsyncWriter, AStaleFailureMarkerDoesNotFailTheSameStepSavedAgain) {
  TempDir dir;
  auto data = data_at(4);
  io::make_dirs_durable(checkpoint_tmp_path(dir.path(), 4));
  std::ofstream(io::join(checkpoint_tmp_path(dir.path(), 4), shard_failure_name(1)));
  AsyncCheckpointWriter rank1(AsyncCheckpointWriter::Mode::kSync);
  rank1.save(request(dir.path(), 4, 1, 2, data));
  AsyncCheckpointWriter rank0(AsyncCheckpointWriter::Mode::kSync);
  rank0.save(request(dir.path(), 4, 0, 2, data));
  expect_checkpoint(dir.path(), 4);
}

// A rank whose data never arrives (its download fence throws, not an I/O error) leaves its
// failure marker: the committing rank gives up on the save at once, not after collect_timeout_s
// (before: it waited the whole timeout, 600 s by default, then failed with a CheckpointError
// that checkpoint.on_error: continue does not tolerate).
TEST(AsyncWriter, ARankWhoseDataNeverArrivesStopsTheCommitWaitingForIt) {
  TempDir dir;
  auto data = data_at(5);
  AsyncCheckpointWriter rank1;
  SaveRequest failing = request(dir.path(), 5, 1, 2, data);
  failing.ready = [] { throw CheckpointError("download failed: an illegal memory access"); };
  rank1.save(failing);
  EXPECT_THROW(rank1.wait(), CheckpointError);
  AsyncCheckpointWriter rank0;
  SaveRequest commit = request(dir.path(), 5, 0, 2, data);
  commit.collect_timeout_s = 60;
  const auto t0 = std::chrono::steady_clock::now();
  rank0.save(commit);
  try {
    rank0.wait();
    FAIL() << "committed without rank 1's shard";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 could not write its shard"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_FALSE(io::exists(checkpoint_path(dir.path(), 5)));
}

// Async mode refuses a slice without data as sync mode does (before: staging read null).
TEST(AsyncWriter, ASliceWithoutDataIsRefusedInEitherMode) {
  TempDir dir;
  auto data = data_at(1);
  for (const auto mode :
       {AsyncCheckpointWriter::Mode::kAsync, AsyncCheckpointWriter::Mode::kSync}) {
    SaveRequest req = request(dir.path(), 1, 0, 1, data);
    req.slices[1].data = nullptr;
    AsyncCheckpointWriter writer(mode);
    EXPECT_THROW(
        {
          writer.save(req);
          writer.wait();
        },
        CheckpointError);
  }
}

TEST(AsyncWriter, DestructorWaitsForTheSaveInFlight) {
  TempDir dir;
  {
    auto data = data_at(8);
    AsyncCheckpointWriter writer;
    writer.save(request(dir.path(), 8, 0, 1, data));
  }
  expect_checkpoint(dir.path(), 8);
}

TEST(AsyncWriter, ManifestStepMustMatch) {
  TempDir dir;
  auto data = data_at(1);
  SaveRequest req = request(dir.path(), 1, 0, 1, data);
  req.manifest.step = 2;
  AsyncCheckpointWriter writer(AsyncCheckpointWriter::Mode::kSync);
  EXPECT_THROW(writer.save(req), CheckpointError);
}

}  // namespace
}  // namespace rm

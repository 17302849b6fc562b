// Round trips: N ranks write uneven slices in-process; the checkpoint is read back whole and as
// the slices of M ranks (resharding), for several (N, M).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"

namespace rm {
namespace {

using testutil::buffer_at;
using testutil::buffer_names;

constexpr uint64_t kN = 10007;  // prime: no slicing divides it evenly

void expect_whole(const std::string& ckpt, int64_t step, uint64_t n) {
  CheckpointReader reader(ckpt);
  for (size_t b = 0; b < buffer_names().size(); ++b) {
    EXPECT_EQ(reader.read_buffer(buffer_names()[b]), buffer_at(step, b, n)) << buffer_names()[b];
  }
}

// Every one of `readers` ranks reads its own even slice with its own reader, as after a
// restart on a different number of ranks.
void expect_resharded(const std::string& ckpt, int64_t step, uint64_t n, int readers) {
  const Manifest manifest = load_manifest(ckpt);
  for (size_t b = 0; b < buffer_names().size(); ++b) {
    const std::vector<float> want = buffer_at(step, b, n);
    for (const auto& [begin, end] : testutil::even_split(n, readers)) {
      std::vector<float> got(end - begin);
      read_range(ckpt, manifest, buffer_names()[b], begin, end, got.data());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + begin))
          << buffer_names()[b] << " [" << begin << "," << end << ") of " << readers;
    }
  }
}

void round_trip(int writers, int readers) {
  TempDir dir;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 1200, writers, kN);
  EXPECT_EQ(ckpt, checkpoint_path(dir.path(), 1200));
  const VerifyResult v = verify_checkpoint(ckpt);
  ASSERT_TRUE(v.ok) << v.error;
  EXPECT_EQ(v.step, 1200);
  EXPECT_EQ(v.data_bytes, 3 * kN * sizeof(float));
  expect_whole(ckpt, 1200, kN);
  expect_resharded(ckpt, 1200, kN, readers);
}

TEST(CheckpointRoundTrip, TwoRanksWhole) {
  round_trip(2, 1);
}
TEST(CheckpointRoundTrip, ThreeRanksWhole) {
  round_trip(3, 1);
}
TEST(CheckpointRoundTrip, Reshard3To2) {
  round_trip(3, 2);
}
TEST(CheckpointRoundTrip, Reshard2To4) {
  round_trip(2, 4);
}
TEST(CheckpointRoundTrip, Reshard1To3) {
  round_trip(1, 3);
}
TEST(CheckpointRoundTrip, Reshard4To3) {
  round_trip(4, 3);
}

TEST(CheckpointRoundTrip, ManifestKeepsStateJobTensorsAndLayout) {
  TempDir dir;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 7, 3, kN);
  const Manifest m = load_manifest(ckpt);
  const Manifest want = testutil::manifest_template(7, 3, kN);
  EXPECT_EQ(m.step, 7);
  EXPECT_EQ(m.world_size, 3);
  EXPECT_EQ(m.shard_mode, want.shard_mode);
  EXPECT_EQ(m.job, want.job);
  EXPECT_EQ(m.state, want.state);
  ASSERT_EQ(m.tensors.size(), 2u);
  EXPECT_EQ(m.tensors[0].name, "layer.weight");
  EXPECT_EQ(m.tensors[1].shape, want.tensors[1].shape);
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.files[1].name, "shard_00001.bin");
  EXPECT_EQ(m.files[1].pieces.size(), 3u);  // one per buffer
  // Only the manifest and the shards are left: descriptors are removed at commit.
  EXPECT_EQ(io::list_dir(ckpt).size(), 4u);
}

TEST(CheckpointRoundTrip, RandomRangesMatch) {
  TempDir dir;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 3, 3, kN);
  const std::vector<float> want = buffer_at(3, 2, kN);
  CheckpointReader reader(ckpt);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200; ++i) {
    uint64_t a = rng() % (kN + 1), b = rng() % (kN + 1);
    if (a > b) std::swap(a, b);
    std::vector<float> got(b - a);
    reader.read_range("adam_v", a, b, got.data());
    ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin() + a)) << a << ".." << b;
  }
}

TEST(CheckpointRoundTrip, MoreRanksThanElements) {
  TempDir dir;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 5, 5, 3);  // empty slices
  ASSERT_TRUE(verify_checkpoint(ckpt).ok) << verify_checkpoint(ckpt).error;
  expect_whole(ckpt, 5, 3);
  expect_resharded(ckpt, 5, 3, 2);
}

TEST(CheckpointRoundTrip, BadReadRangesThrow) {
  TempDir dir;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 1, 2, 100);
  CheckpointReader reader(ckpt);
  float x[4];
  EXPECT_THROW(reader.read_range("params", 99, 101, x), CheckpointError);
  EXPECT_THROW(reader.read_range("params", 3, 2, x), CheckpointError);
  EXPECT_THROW(reader.read_range("grads", 0, 1, x), CheckpointError);
  reader.read_range("params", 50, 50, x);  // empty is fine
}

// Sets the soft limit of open files for its lifetime.
class OpenFileLimit {
 public:
  explicit OpenFileLimit(rlim_t soft) {
    EXPECT_EQ(getrlimit(RLIMIT_NOFILE, &saved_), 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  }
  ~OpenFileLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

// A checkpoint of more ranks than the process may open files: each rank's shard is its own
// file, and a reader that kept them all open failed with EMFILE, so the checkpoint was passed
// over as damaged. Here 300 ranks' files under a limit of 160.
TEST(CheckpointRoundTrip, ManyRanksVerifyAndReadUnderALowOpenFileLimit) {
  TempDir dir;
  constexpr int kWriters = 300;
  constexpr uint64_t kElems = 3001;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 7, kWriters, kElems);
  ASSERT_EQ(load_manifest(ckpt).files.size(), static_cast<size_t>(kWriters));
  OpenFileLimit limit(160);
  const VerifyResult v = verify_checkpoint(ckpt);
  EXPECT_TRUE(v.ok) << v.error;
  CheckpointReader reader(ckpt);
  reader.check_files();
  EXPECT_LE(reader.open_files(), CheckpointReader::kMaxOpenFiles);
  // Whole buffers twice: the second pass reopens files whose pieces are already checked.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t b = 0; b < buffer_names().size(); ++b) {
      EXPECT_EQ(reader.read_buffer(buffer_names()[b]), buffer_at(7, b, kElems)) << pass;
    }
  }
  EXPECT_LE(reader.open_files(), CheckpointReader::kMaxOpenFiles);
  expect_resharded(ckpt, 7, kElems, 3);
}

// A file closed to make room and opened again must be the file that was checked: another file
// put in its place (same size, other contents) would otherwise be read unchecked.
TEST(CheckpointRoundTrip, AFileReplacedBetweenReadsIsRefused) {
  TempDir dir;
  const int writers = static_cast<int>(CheckpointReader::kMaxOpenFiles) + 2;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 3, writers, 4000);
  CheckpointReader reader(ckpt);
  reader.verify_all();  // every piece checked; the first files were closed again
  const std::string first = io::join(ckpt, reader.manifest().files[0].name);
  const std::string copy = first + ".copy";
  std::string bytes = io::read_file(first);
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x5a;
  {
    io::Fd fd = io::open_write_truncate(copy);
    io::write_all(fd.get(), bytes.data(), bytes.size(), copy);
  }
  io::rename_path(copy, first);
  std::vector<float> out(4000);
  const std::string error =
      testutil::error_of([&] { reader.read_range("params", 0, 4000, out.data()); });
  EXPECT_NE(error.find(first + ": replaced while the checkpoint was being read"), std::string::npos)
      << error;
}

// write_shard reads its shard back from the storage before its descriptor says it is durable:
// a file whose bytes changed between the write and the read (storage that did not keep them;
// here a byte changed as the read-back begins) fails the save, and leaves no descriptor for
// rank 0 to commit.
std::string g_shard_to_damage;
void damage_as_read_back_begins(const char* phase) {
  if (std::string(phase) != "shard:verify" || g_shard_to_damage.empty()) return;
  const int fd = ::open(g_shard_to_damage.c_str(), O_WRONLY);
  if (fd < 0) return;
  const char byte = 0x55;
  if (::pwrite(fd, &byte, 1, 100) != 1) std::abort();
  ::close(fd);
}

TEST(CheckpointRoundTrip, AShardThatDoesNotReadBackAsWrittenFailsItsSave) {
  TempDir dir;
  const std::vector<float> data = testutil::buffer_at(1, 0, 1000);
  const std::string tmp = prepare_checkpoint_dir(dir.path(), 1);
  g_shard_to_damage = io::join(tmp, shard_file_name(0));
  add_checkpoint_phase_hook(damage_as_read_back_begins);
  const std::string error = testutil::error_of([&] {
    write_shard(tmp, 1, 0, {ShardSlice{"params", 0, 1000, data.data()}});
  });
  remove_checkpoint_phase_hook(damage_as_read_back_begins);
  g_shard_to_damage.clear();
  EXPECT_NE(error.find(io::join(tmp, shard_file_name(0)) +
                       ": read back after its fsync, piece params[0,1000) hashes to "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("(the storage did not keep what was written)"), std::string::npos) << error;
  EXPECT_FALSE(io::exists(io::join(tmp, shard_descriptor_name(0))));
  // Undamaged, the same save reads back and is described.
  write_shard(tmp, 1, 0, {ShardSlice{"params", 0, 1000, data.data()}});
  EXPECT_TRUE(io::exists(io::join(tmp, shard_descriptor_name(0))));
}

TEST(CheckpointRoundTrip, RecommittingAStepReplacesIt) {
  // A job that resumed from an older checkpoint reaches an existing step again.
  TempDir dir;
  testutil::save_steps_checkpoint(dir.path(), 9, 2, 50);
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 9, 3, 80);
  ASSERT_TRUE(verify_checkpoint(ckpt).ok);
  EXPECT_EQ(load_manifest(ckpt).world_size, 3);
  expect_whole(ckpt, 9, 80);
  for (const std::string& name : io::list_dir(checkpoints_root(dir.path()))) {
    EXPECT_EQ(name, "step_00000009");  // no scratch left behind
  }
}

TEST(CheckpointPaths, Names) {
  EXPECT_EQ(step_dir_name(1200), "step_00001200");
  EXPECT_EQ(step_dir_name(123456789), "step_123456789");
  EXPECT_EQ(shard_file_name(3), "shard_00003.bin");
  const auto c = parse_step_dir_name("step_00001200");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 1200);
  EXPECT_TRUE(c->committed);
  const auto t = parse_step_dir_name("step_00001200.tmp");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->committed);
  EXPECT_TRUE(parse_step_dir_name("step_00001200.del.tmp"));
  EXPECT_TRUE(parse_step_dir_name("step_123456789"));
  EXPECT_FALSE(parse_step_dir_name("step_1200"));       // not canonical
  EXPECT_FALSE(parse_step_dir_name("step_000001200"));  // not canonical
  EXPECT_FALSE(parse_step_dir_name("step_00001200x"));
  EXPECT_FALSE(parse_step_dir_name("step_00001200.tmpx"));
  EXPECT_FALSE(parse_step_dir_name("step_"));
  EXPECT_FALSE(parse_step_dir_name("weights.bin"));
  EXPECT_FALSE(parse_step_dir_name("step_99999999999999999999"));
}

}  // namespace
}  // namespace rm

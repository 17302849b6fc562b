// Damage: every kind of corruption is caught by verify_checkpoint with a message naming the bad
// file and the reason, and find_resume_checkpoint skips the damaged checkpoint (saying why) for
// the older good one.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <ostream>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"
#include "io/atomic_file.h"

namespace rm {
namespace {

using nlohmann::json;

constexpr uint64_t kN = 4000;

struct Case {
  const char* name;
  std::function<void(const std::string& ckpt)> damage;
  const char* file;    // the message must name this file...
  const char* reason;  // ...and contain this
};

// An edit of the manifest's structure, sealed again with a checksum of the edited text (as a
// writer with a bug would write it), so that the structure's own checks are what must catch it.
void edit_manifest(const std::string& ckpt, const std::function<void(json&)>& edit) {
  const std::string path = io::join(ckpt, kManifestFileName);
  json j = json::parse(io::read_file(path));
  j["state"][kManifestChecksumKey] = kUnsealed;
  edit(j);
  const std::string text = with_manifest_checksum(j.dump(1) + "\n");
  write_file_atomic(path, text.data(), text.size());
}

// A byte of the manifest's text changed in place: `from` replaced by `to` (as long).
void replace_in_manifest(const std::string& ckpt, const std::string& from, const std::string& to) {
  const std::string path = io::join(ckpt, kManifestFileName);
  std::string text = io::read_file(path);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  write_file_atomic(path, text.data(), text.size());
}

void write_manifest_text(const std::string& ckpt, const std::string& text) {
  write_file_atomic(io::join(ckpt, kManifestFileName), text.data(), text.size());
}

void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
}

// The last piece of the last file: adam_v's tail, written by the last rank.
json& last_piece(json& j) {
  return j["files"].back()["pieces"].back();
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"FlippedByte",
       [](const std::string& c) { flip_byte(io::join(c, "shard_00001.bin"), 4 * 100 + 2); },
       "shard_00001.bin", "checksum mismatch in piece params["},
      {"Truncated",
       [](const std::string& c) {
         ASSERT_EQ(::truncate(io::join(c, "shard_00000.bin").c_str(), 1000), 0);
       },
       "shard_00000.bin", "truncated"},
      {"Extended",
       [](const std::string& c) {
         const int fd = ::open(io::join(c, "shard_00000.bin").c_str(), O_WRONLY | O_APPEND);
         ASSERT_EQ(::write(fd, "xx", 2), 2);
         ::close(fd);
       },
       "shard_00000.bin", "manifest says"},
      {"MissingShard",
       [](const std::string& c) { io::unlink_file(io::join(c, "shard_00001.bin")); },
       "shard_00001.bin", "missing"},
      {"MissingManifest",
       [](const std::string& c) { io::unlink_file(io::join(c, kManifestFileName)); },
       "manifest.json", "No such file"},
      {"InvalidJson",
       [](const std::string& c) { write_manifest_text(c, "{\"format\": \"ringmaster-chec"); },
       "manifest.json", "invalid JSON"},
      {"WrongTypeStep",
       [](const std::string& c) { edit_manifest(c, [](json& j) { j["step"] = "200"; }); },
       "manifest.json", "step: expected a non-negative integer, found string"},
      {"WrongTypePieces",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { j["files"][0]["pieces"] = json::object(); });
       },
       "manifest.json", "files[0].pieces: expected an array"},
      {"NegativeBegin",
       [](const std::string& c) { edit_manifest(c, [](json& j) { last_piece(j)["begin"] = -4; }); },
       "manifest.json", "files[1].pieces[2].begin: -4 is negative"},
      {"OverlappingRanges",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) {
           json& p = last_piece(j);  // start one element early: overlaps rank 0's adam_v piece
           p["begin"] = p["begin"].get<uint64_t>() - 1;
           p["bytes"] = p["bytes"].get<uint64_t>() + 4;
           j["files"].back()["size"] = j["files"].back()["size"].get<uint64_t>() + 4;
         });
       },
       "manifest.json", "overlaps"},
      {"GapInRanges",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) {
           json& p = last_piece(j);
           p["begin"] = p["begin"].get<uint64_t>() + 1;
           p["bytes"] = p["bytes"].get<uint64_t>() - 4;
         });
       },
       "manifest.json", "are in no piece"},
      {"RangePastEnd",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) {
           json& p = last_piece(j);
           p["end"] = p["end"].get<uint64_t>() + 1;
           p["bytes"] = p["bytes"].get<uint64_t>() + 4;
           j["files"].back()["size"] = j["files"].back()["size"].get<uint64_t>() + 4;
         });
       },
       "manifest.json", "past the end of buffer 'adam_v'"},
      {"PiecePastFileEnd",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { last_piece(j)["offset"] = 1u << 30; });
       },
       "manifest.json", "past the end of the file"},
      {"PathTraversalName",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { j["files"][0]["name"] = "../shard_00000.bin"; });
       },
       "manifest.json", "files[0].name: '../shard_00000.bin' is not a plain file name"},
      {"AbsolutePathName",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { j["files"][0]["name"] = "/etc/passwd"; });
       },
       "manifest.json", "is not a plain file name"},
      {"WrongChecksumText",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { last_piece(j)["xxh64"] = "not-hex"; });
       },
       "manifest.json", "xxh64: 'not-hex' is not 16 lowercase hex digits"},
      {"WrongChecksumValue",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { last_piece(j)["xxh64"] = "0123456789abcdef"; });
       },
       "shard_00001.bin", "checksum mismatch in piece adam_v["},
      {"StepDoesNotMatchDirectory",
       [](const std::string& c) { edit_manifest(c, [](json& j) { j["step"] = 100; }); },
       "manifest.json", "step: 100, but the directory is step_00000200"},
      {"AbsurdCount",
       [](const std::string& c) {
         edit_manifest(c, [](json& j) { j["buffers"][0]["count"] = uint64_t{1} << 60; });
       },
       "manifest.json", "buffers[0].count"},
      // The job and the state, which no file's checksum covers: the manifest's own does.
      {"JobTextChanged",
       [](const std::string& c) { replace_in_manifest(c, "kind: mlp", "kind: gpt"); },
       "manifest.json", "manifest_xxh64: checksum mismatch"},
      {"StateChanged",
       [](const std::string& c) { replace_in_manifest(c, "\"counter\": 600", "\"counter\": 601"); },
       "manifest.json", "manifest_xxh64: checksum mismatch"},
      {"UnknownVersion",
       [](const std::string& c) { edit_manifest(c, [](json& j) { j["version"] = 2; }); },
       "manifest.json", "version: 2 is not supported"},
  };
  return all;
}

// gtest prints parameters in test listings (and so in CTest names): print the case's name.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class CheckpointDamage : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointDamage, DetectedByVerifyAndSkippedByResume) {
  const Case& c = GetParam();
  TempDir dir;
  testutil::save_steps_checkpoint(dir.path(), 100, 2, kN);
  const std::string bad = testutil::save_steps_checkpoint(dir.path(), 200, 2, kN);
  ASSERT_TRUE(verify_checkpoint(bad).ok);
  c.damage(bad);

  const VerifyResult v = verify_checkpoint(bad);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find(io::join(bad, c.file)), std::string::npos) << v.error;
  EXPECT_NE(v.error.find(c.reason), std::string::npos) << v.error;

  // Shared among ranks (VerifyShare), the damage is caught by some part, with the same words.
  for (int parts : {2, 3, 7}) {
    std::string caught;
    for (int part = 0; part < parts && caught.empty(); ++part) {
      const VerifyResult s = verify_checkpoint(bad, VerifyLevel::kChecksums, {part, parts});
      if (!s.ok) caught = s.error;
    }
    EXPECT_NE(caught.find(io::join(bad, c.file)), std::string::npos) << parts << ": " << caught;
    EXPECT_NE(caught.find(c.reason), std::string::npos) << parts << ": " << caught;
  }

  std::vector<std::string> report;
  const auto resume = find_resume_checkpoint(dir.path(), &report);
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->step, 100);
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].rfind("skipped " + bad + ": ", 0), 0u) << report[0];
  EXPECT_NE(report[0].find(c.reason), std::string::npos) << report[0];

  // Listing shows both, the damaged one with the same reason.
  const auto list = list_checkpoints(dir.path());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(list[0].verify.ok);
  EXPECT_FALSE(list[1].verify.ok);
  EXPECT_EQ(list[1].verify.error, v.error);
}

INSTANTIATE_TEST_SUITE_P(All, CheckpointDamage, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CheckpointDamageRead, ReaderRefusesCorruptPieceButReadsOthers) {
  TempDir dir;
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 1, 2, kN);
  flip_byte(io::join(ckpt, "shard_00000.bin"), 8);  // params, rank 0
  CheckpointReader reader(ckpt);
  std::vector<float> x(10);
  try {
    reader.read_range("params", 0, 10, x.data());
    FAIL() << "corrupt piece was read";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  const auto split = testutil::uneven_split(kN, 2);  // rank 1's params are intact
  std::vector<float> tail(split[1].second - split[1].first);
  reader.read_range("params", split[1].first, split[1].second, tail.data());
  EXPECT_EQ(tail[0], testutil::value_at(1, 0, split[1].first));
}

TEST(VerifyShare, ThePartsHashEveryPieceOnceInNearEqualShares) {
  TempDir dir;
  // 5 uneven shards of three buffers: 15 pieces of different sizes.
  const std::string ckpt = testutil::save_steps_checkpoint(dir.path(), 3, 5, 60000);
  const Manifest m = load_manifest(ckpt);
  uint64_t total = 0, largest_piece = 0;
  for (const ShardFileInfo& f : m.files) {
    for (const PieceInfo& p : f.pieces) {
      total += p.bytes;
      largest_piece = std::max(largest_piece, p.bytes);
    }
  }
  EXPECT_EQ(verify_checkpoint(ckpt).hashed_bytes, total);
  for (int parts = 2; parts <= 20; ++parts) {
    uint64_t sum = 0, largest = 0;
    for (int part = 0; part < parts; ++part) {
      const VerifyResult v = verify_checkpoint(ckpt, VerifyLevel::kChecksums, {part, parts});
      ASSERT_TRUE(v.ok) << v.error;
      sum += v.hashed_bytes;
      largest = std::max(largest, v.hashed_bytes);
    }
    EXPECT_EQ(sum, total) << parts << " parts: every piece hashed exactly once";
    // A part holds the pieces whose middle byte falls in its range: at most its range and half
    // a piece on either side.
    EXPECT_LE(largest, total / parts + largest_piece + 1) << parts << " parts";
  }
  // One reader that verified its part does not hash those pieces again for the next.
  CheckpointReader reader(ckpt);
  const uint64_t first = reader.verify_share({0, 2}, VerifyLevel::kChecksums);
  EXPECT_GT(first, 0u);
  EXPECT_EQ(reader.verify_share({0, 2}, VerifyLevel::kChecksums), 0u);
  EXPECT_EQ(reader.verify_share({1, 2}, VerifyLevel::kChecksums), total - first);
  EXPECT_EQ(reader.verify_share({0, 1}, VerifyLevel::kStructure), 0u);
}

TEST(VerifyShare, AShareOfAFileWithoutPiecesChecksItsSize) {
  TempDir dir;
  // Rank 0 had nothing to save (a shard without pieces); rank 1 saved every buffer whole.
  constexpr int64_t kStep = 4;
  constexpr uint64_t n = 64;
  const std::string tmp = prepare_checkpoint_dir(dir.path(), kStep);
  write_shard(tmp, kStep, 0, {});
  std::vector<std::vector<float>> data;
  std::vector<ShardSlice> all;
  for (size_t b = 0; b < testutil::buffer_names().size(); ++b) {
    data.push_back(testutil::buffer_at(kStep, static_cast<int>(b), n));
  }
  for (size_t b = 0; b < data.size(); ++b) {
    all.push_back(ShardSlice{testutil::buffer_names()[b], 0, n, data[b].data()});
  }
  write_shard(tmp, kStep, 1, all);
  Manifest m = testutil::manifest_template(kStep, 2, n);
  m.files = collect_shards(tmp, kStep, 2, 0);
  const std::string ckpt = commit_checkpoint(dir.path(), kStep, m);
  ASSERT_TRUE(m.files[0].pieces.empty());

  const std::string path = io::join(ckpt, m.files[0].name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "x", 1), 1);
  ::close(fd);
  // File 0 is part 0's of two to check (with the first piece of file 1); part 1's pieces are
  // intact.
  const VerifyResult owner = verify_checkpoint(ckpt, VerifyLevel::kChecksums, {0, 2});
  EXPECT_FALSE(owner.ok);
  EXPECT_NE(owner.error.find(path + ": 1 bytes, manifest says 0"), std::string::npos)
      << owner.error;
  const VerifyResult other = verify_checkpoint(ckpt, VerifyLevel::kChecksums, {1, 2});
  EXPECT_TRUE(other.ok) << other.error;
  EXPECT_EQ(other.hashed_bytes, 2 * n * sizeof(float));  // the last two of the three pieces
}

TEST(CheckpointDamageRead, NothingToResumeFrom) {
  TempDir dir;
  std::vector<std::string> report;
  EXPECT_FALSE(find_resume_checkpoint(dir.path(), &report));
  EXPECT_TRUE(report.empty());
  const std::string only = testutil::save_steps_checkpoint(dir.path(), 1, 1, 10);
  io::unlink_file(io::join(only, "shard_00000.bin"));
  io::make_dir(checkpoint_tmp_path(dir.path(), 2));
  EXPECT_FALSE(find_resume_checkpoint(dir.path(), &report));
  ASSERT_EQ(report.size(), 2u);
  EXPECT_NE(report[0].find("step_00000002.tmp: incomplete (never committed)"), std::string::npos);
  EXPECT_NE(report[1].find("shard_00000.bin: missing"), std::string::npos) << report[1];
}

}  // namespace
}  // namespace rm

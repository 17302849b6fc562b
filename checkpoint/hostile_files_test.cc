// Hostile files where checkpoint/ reads: manifests, weights, safetensors headers and whole-file
// reads. Nothing that is no regular file is waited on or read forever, and no size a file
// merely claims is allocated before the file's real size backs it.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/json_guard.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/weights_file.h"
#include "io/atomic_file.h"

namespace rm {
namespace {

using nlohmann::json;
using testutil::error_of;

std::string make_fifo(const std::string& path) {
  if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path);
  return path;
}

TEST(HostileFiles, ManifestThatIsNoRegularFileIsNotWaitedOn) {
  TempDir dir;
  const std::string fifo_dir = dir.file("fifo"), zero_dir = dir.file("zero"),
                    dir_dir = dir.file("dir");
  for (const std::string& d : {fifo_dir, zero_dir, dir_dir}) io::make_dir(d);
  make_fifo(io::join(fifo_dir, kManifestFileName));
  std::filesystem::create_symlink("/dev/zero", io::join(zero_dir, kManifestFileName));
  io::make_dir(io::join(dir_dir, kManifestFileName));
  const std::map<std::string, std::string> kinds = {
      {fifo_dir, "a FIFO"}, {zero_dir, "a character device"}, {dir_dir, "a directory"}};
  for (const std::string& d : {fifo_dir, zero_dir, dir_dir}) {
    const std::string want = io::join(d, kManifestFileName) + ": " + kinds.at(d) +
                             ", not a regular file";
    EXPECT_EQ(error_of([&] { load_manifest(d); }), want);
    const VerifyResult r = verify_checkpoint(d);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, want);
  }
}

TEST(HostileFiles, ManifestSizeIsCheckedBeforeReading) {
  TempDir dir;
  const std::string path = io::join(dir.path(), kManifestFileName);
  std::ofstream(path) << "{}";
  std::filesystem::resize_file(path, kMaxManifestBytes + 1);  // sparse
  EXPECT_EQ(error_of([&] { load_manifest(dir.path()); }),
            path + ": 67108865 bytes, larger than the 64 MiB a manifest may have");
}

TEST(HostileFiles, JsonShapeIsBoundedBeforeParsing) {
  EXPECT_EQ(check_json_shape("[" + std::string(63, '[') + std::string(64, ']')), "");
  EXPECT_EQ(check_json_shape(std::string(65, '[')), "JSON nested deeper than 64 levels");
  EXPECT_EQ(check_json_shape("\"[[[[\\\"[[[[\"", 2), "");  // brackets inside a string
  EXPECT_EQ(check_json_shape("[0,0,0]", 64, 4), "");
  EXPECT_EQ(check_json_shape("[0,0,0,0]", 64, 4), "more than 4 JSON values");
  EXPECT_EQ(check_json_shape("{\"a\":0,\"b\":0}", 64, 4), "more than 4 JSON values");

  std::string values = "[0";
  for (size_t i = 0; i < kMaxJsonValues; ++i) values += ",0";
  EXPECT_EQ(error_of([&] { parse_manifest(values + "]", "m.json"); }),
            "m.json: more than " + std::to_string(kMaxJsonValues) + " JSON values");
}

// The writer refuses what every reader would refuse: a checkpoint committed with such a
// manifest would be passed over as damaged at the resume that needed it.
TEST(HostileFiles, AManifestNoReaderAcceptsIsNotCommitted) {
  TempDir run;
  json state = {{"step", 1}};
  for (int i = 0; i < kMaxJsonDepth; ++i) state = json{{"nested", state}};
  const std::string error =
      error_of([&] { testutil::save_steps_checkpoint(run.path(), 1, 2, 100, state); });
  EXPECT_NE(error.find(": the manifest of 2 ranks and 2 tensors is beyond what a reader accepts "
                       "(JSON nested deeper than 64 levels); not committed"),
            std::string::npos)
      << error;
  EXPECT_FALSE(io::exists(checkpoint_path(run.path(), 1)));
}

// A manifest may claim any count within its bounds (2^48 floats = 1 PiB); the reader allocates
// a buffer only after the shard files' real sizes agree with the claim.
TEST(HostileFiles, ClaimedBufferSizesAreCheckedBeforeAllocating) {
  TempDir run;
  const std::string ckpt = testutil::save_steps_checkpoint(run.path(), 1, 1, 4000);
  const std::string path = io::join(ckpt, kManifestFileName);
  json j = json::parse(io::read_file(path));
  j["state"][kManifestChecksumKey] = kUnsealed;  // sealed again below: the claim passes every check
  const uint64_t n = kMaxElements;
  for (json& b : j["buffers"]) b["count"] = n;
  json& file = j["files"][0];
  file["size"] = 3 * 4 * n;
  for (size_t p = 0; p < file["pieces"].size(); ++p) {
    json& piece = file["pieces"][p];
    piece["begin"] = 0;
    piece["end"] = n;
    piece["offset"] = p * 4 * n;
    piece["bytes"] = 4 * n;
  }
  const std::string text = with_manifest_checksum(j.dump(1) + "\n");
  write_file_atomic(path, text.data(), text.size());

  CheckpointReader reader(ckpt);  // the manifest itself is consistent
  const std::string message = error_of([&] { reader.read_buffer("params"); });
  EXPECT_NE(
      message.find("shard_00000.bin: 48000 bytes, manifest says 3377699720527872 (truncated)"),
      std::string::npos)
      << message;
}

TEST(HostileFiles, ReadFileRefusesSpecialAndOversizedFiles) {
  TempDir dir;
  const std::string fifo = make_fifo(dir.file("fifo"));
  EXPECT_EQ(error_of([&] { io::read_file(fifo); }), fifo + ": a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { io::read_file("/dev/zero"); }), "/dev/zero: a character device, not a regular file");
  EXPECT_EQ(error_of([&] { io::read_file(dir.path()); }), dir.path() + ": a directory, not a regular file");
  const std::string small = dir.file("small");
  write_file_atomic(small, "12345", 5);
  EXPECT_EQ(io::read_file(small, 5), "12345");
  EXPECT_EQ(error_of([&] { io::read_file(small, 4); }),
            small + ": 5 bytes, more than the 4 this file may have");
}

TEST(HostileFiles, WeightsAreSizeCheckedBeforeTheirPayloadIsRead) {
  TempDir dir;
  const std::string fifo = make_fifo(dir.file("weights.fifo"));
  EXPECT_EQ(error_of([&] { load_weights(fifo, 4); }), fifo + ": a FIFO, not a regular file");
  // A header that claims what the model needs, in a file far too short for it.
  const std::string path = dir.file("weights.bin");
  const float w[4] = {1, 2, 3, 4};
  save_weights(path, w, 4);
  std::string bytes = io::read_file(path);
  const uint64_t huge = uint64_t{1} << 48;
  bytes.replace(8, 8, reinterpret_cast<const char*>(&huge), 8);
  write_file_atomic(path, bytes.data(), bytes.size());
  EXPECT_EQ(error_of([&] { load_weights(path, huge); }),
            path + ": size 40 bytes, expected 1125899906842648");
  EXPECT_EQ(error_of([&] { load_weights(dir.file("none"), 4); }),
            dir.file("none") + ": cannot open: No such file or directory");
}

TEST(HostileFiles, SafetensorsHeaderIsBoundedBeforeParsing) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const auto write = [&](uint64_t claimed, const std::string& header) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&claimed), 8);
    out << header;
  };
  write(uint64_t{3} << 30, "{}");  // a header length of 3 GiB in a 10-byte file
  EXPECT_EQ(error_of([&] { read_safetensors_header(path); }),
            path + ": header length 3221225472 is impossible for a 10-byte file");
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  write(deep.size(), deep);
  EXPECT_EQ(error_of([&] { read_safetensors_header(path); }),
            path + ": header: JSON nested deeper than 64 levels");
  EXPECT_EQ(error_of([&] { read_safetensors_header(make_fifo(dir.file("fifo"))); }),
            dir.file("fifo") + ": a FIFO, not a regular file");
}

}  // namespace
}  // namespace rm

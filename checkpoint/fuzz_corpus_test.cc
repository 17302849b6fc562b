// Checks of the manifest fuzz corpus (fuzz/corpora/manifest/) beyond the replay every fuzz target gets
// (fuzz/corpus_replay_test.cc: valid_* parse, bad_* are rejected with CheckpointError naming the
// input, nothing escapes the entry point): the corpus keeps both outcomes in numbers, and the
// valid_*_ckpt seeds are whole checkpoints that verify as they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/manifest.h"
#include "io/atomic_file.h"

namespace rm {
namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> files;
  for (const std::string& name : io::list_dir(RM_FUZZ_CORPUS_DIR)) {
    if (name != "README.md") files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string manifest_part(const std::string& input) {
  return input.substr(0, input.find("\n--shard--\n"));
}

// The generic replay (fuzz/corpus_replay_test.cc) checks each input's outcome; this checks the
// corpus still spans both outcomes in numbers, so that a parser change that suddenly accepts or
// rejects everything shows.
TEST(ManifestCorpus, ParsesSomeAndRejectsSome) {
  const auto files = corpus();
  ASSERT_GE(files.size(), 30u);
  int parsed = 0, rejected = 0;
  for (const std::string& name : files) {
    const std::string input = io::read_file(io::join(RM_FUZZ_CORPUS_DIR, name));
    try {
      parse_manifest(manifest_part(input), name);
      ++parsed;
    } catch (const CheckpointError&) {
      ++rejected;
    }
  }
  EXPECT_GE(parsed, 10);
  EXPECT_GE(rejected, 30);
}

// The valid_*_ckpt inputs carry their shards: as a checkpoint directory they verify as they
// are, so the harness reaches the read path without its checksum fix-up.
TEST(ManifestCorpus, ValidCheckpointInputsVerifyAsIs) {
  int checked = 0;
  for (const std::string& name : corpus()) {
    if (name.rfind("valid_", 0) != 0 || name.find("_ckpt") == std::string::npos) continue;
    const std::string input = io::read_file(io::join(RM_FUZZ_CORPUS_DIR, name));
    std::vector<std::string> parts;
    for (size_t at = 0;;) {
      const size_t next = input.find("\n--shard--\n", at);
      parts.push_back(input.substr(at, next == std::string::npos ? next : next - at));
      if (next == std::string::npos) break;
      at = next + 11;
    }
    const Manifest m = parse_manifest(parts[0], name);
    testutil::TempDir dir;
    const std::string ckpt = dir.file(step_dir_name(m.step));
    io::make_dir(ckpt);
    write_file_atomic(io::join(ckpt, kManifestFileName), parts[0].data(), parts[0].size());
    for (size_t f = 0; f < m.files.size(); ++f) {
      const std::string& blob = parts[1 + f % (parts.size() - 1)];
      write_file_atomic(io::join(ckpt, m.files[f].name), blob.data(), blob.size());
    }
    const VerifyResult v = verify_checkpoint(ckpt);
    EXPECT_TRUE(v.ok) << name << ": " << v.error;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

}  // namespace
}  // namespace rm

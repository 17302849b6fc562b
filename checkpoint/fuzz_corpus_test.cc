// Replays the fixed fuzz corpus (fuzz_corpus/) through the libFuzzer entry point, so the fuzz
// harness runs on every build, sanitizers or not. Each input must parse or throw
// CheckpointError -- never anything else -- and the entry point must not throw at all.
// Files named valid_* must parse and verify; bad_* must be rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/manifest.h"
#include "io/atomic_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

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

TEST(FuzzCorpus, EveryInputParsesOrThrowsCheckpointError) {
  const auto files = corpus();
  ASSERT_GE(files.size(), 30u);
  int parsed = 0, rejected = 0;
  for (const std::string& name : files) {
    const std::string input = io::read_file(io::join(RM_FUZZ_CORPUS_DIR, name));
    bool ok = false;
    try {
      parse_manifest(manifest_part(input), name);
      ok = true;
      ++parsed;
    } catch (const CheckpointError& e) {
      ++rejected;
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": threw something else: " << e.what();
    } catch (...) {
      ADD_FAILURE() << name << ": threw a non-exception";
    }
    const bool want_valid = name.rfind("valid_", 0) == 0, want_bad = name.rfind("bad_", 0) == 0;
    EXPECT_TRUE(!want_valid || ok) << name << " should parse";
    EXPECT_TRUE(!want_bad || !ok) << name << " should be rejected";
    EXPECT_NO_THROW(
        LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size()))
        << name;
  }
  std::printf("[fuzz corpus] %zu inputs: %d parsed, %d rejected\n", files.size(), parsed, rejected);
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

// The valid_*_ckpt inputs carry their shards: as a checkpoint directory they verify as they
// are, so the harness reaches the read path without its checksum fix-up.
TEST(FuzzCorpus, ValidCheckpointInputsVerifyAsIs) {
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
    const std::string ckpt = dir.sub(step_dir_name(m.step));
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

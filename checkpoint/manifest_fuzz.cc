// Fuzz target: the checkpoint loading path -- manifest parser, validator, verifier, reader.
//
// Input: manifest text, optionally followed by shard blobs, each introduced by the separator
// line "\n--shard--\n". The manifest is parsed with `name` as its file name; if it parses, a
// checkpoint directory is built from the input -- manifest.json as given, shard file i holding
// blob i % #blobs (empty without blobs) -- and verified. Then the manifest's checksums and file
// sizes are fixed up to match the blobs, so that inputs get past the checksum gate, and the
// directory is verified again; when it verifies, every buffer is read back through
// CheckpointReader and compared with the bytes the manifest points at.
//
// Contract (fuzz/fuzz_target.h): accepted = the manifest parses; rejected = parse_manifest
// threw CheckpointError "NAME: ...". verify_checkpoint returns its verdict and must not throw.
// Anything else is a finding: another exception, a checkpoint that verifies but then fails to
// read or reads wrong data (std::logic_error), a crash, a sanitizer report, a hang.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz_corpus_test.cc and
// fuzz/corpus_replay_test.cc replay fuzz/corpora/manifest/ through it.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/manifest.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_dir.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {
namespace {

constexpr char kSeparator[] = "\n--shard--\n";
constexpr size_t kMaxFuzzFiles = 16;
constexpr uint64_t kMaxFuzzElements = uint64_t{1} << 22;

void write_plain(const std::string& path, const std::string& bytes) {
  io::Fd fd = io::open_write_truncate(path);
  io::write_all(fd.get(), bytes.data(), bytes.size(), path);
  fd.close_checked(path);
}

// Builds ckpt_dir afresh: manifest.json = text, shard files from the blobs.
void build_dir(const std::string& dir, const std::string& text, const Manifest& m,
               const std::vector<std::string>& blobs) {
  io::remove_tree(dir);
  io::make_dir(dir);
  write_plain(io::join(dir, kManifestFileName), text);
  for (size_t i = 0; i < m.files.size(); ++i) {
    write_plain(io::join(dir, m.files[i].name), blobs.empty() ? "" : blobs[i % blobs.size()]);
  }
}

void check_reads(const std::string& dir, const Manifest& m, const std::vector<std::string>& blobs) {
  CheckpointReader reader(dir);
  for (const BufferInfo& b : m.buffers) {
    if (b.count > kMaxFuzzElements) continue;
    std::vector<float> got(b.count), want(b.count);
    try {
      reader.read_range(b.name, 0, b.count, got.data());
      if (b.count >= 3) reader.read_range(b.name, b.count / 3, b.count / 3 + 1, got.data());
      reader.read_range(b.name, 0, b.count, got.data());
    } catch (const CheckpointError& e) {
      fuzz::require(false, std::string("verified checkpoint failed to read: ") + e.what());
    }
    for (size_t f = 0; f < m.files.size(); ++f) {
      const std::string& blob = blobs[f % blobs.size()];
      for (const PieceInfo& p : m.files[f].pieces) {
        if (p.buffer == b.name && p.bytes > 0) {
          std::memcpy(want.data() + p.begin, blob.data() + p.offset, p.bytes);
        }
      }
    }
    fuzz::require(std::memcmp(got.data(), want.data(), b.count * sizeof(float)) == 0,
                  "buffer '" + b.name + "' read back differently from its pieces");
  }
}

// Removes the checkpoint directory of one input when the input is done: its name comes from the
// input's step, so directories left behind would pile up over millions of inputs.
class RemovedAtExit {
 public:
  explicit RemovedAtExit(std::string dir) : dir_(std::move(dir)) {}
  ~RemovedAtExit() {
    try {
      io::remove_tree(dir_);
    } catch (...) {
    }
  }
  RemovedAtExit(const RemovedAtExit&) = delete;
  RemovedAtExit& operator=(const RemovedAtExit&) = delete;

 private:
  std::string dir_;
};

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t next = input.find(kSeparator, at);
    parts.emplace_back(input.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + sizeof(kSeparator) - 1;
  }
  const std::string text = parts[0];
  const std::vector<std::string> blobs(parts.begin() + 1, parts.end());

  std::optional<Manifest> parsed;
  try {
    parsed = parse_manifest(text, name);
  } catch (const CheckpointError& e) {
    return fuzz::rejected(e.what(), name + ": ");
  }
  Manifest m = *parsed;
  if (m.files.size() > kMaxFuzzFiles) return fuzz::accepted();

  const std::string dir = io::join(fuzz::scratch_dir(), step_dir_name(m.step));
  const RemovedAtExit cleanup(dir);
  build_dir(dir, text, m, blobs);
  verify_checkpoint(dir);  // returns its verdict; must not throw

  // Make the manifest agree with the blobs where it can, to reach the read path.
  if (blobs.empty()) return fuzz::accepted();
  for (size_t f = 0; f < m.files.size(); ++f) {
    const std::string& blob = blobs[f % blobs.size()];
    m.files[f].size = blob.size();
    for (PieceInfo& p : m.files[f].pieces) {
      if (p.offset <= blob.size() && p.bytes <= blob.size() - p.offset) {
        p.xxh64 = XXH64(blob.data() + p.offset, p.bytes, 0);
      }
    }
  }
  const std::string fixed = to_json(m);
  build_dir(dir, fixed, m, blobs);
  const VerifyResult v = verify_checkpoint(dir);
  if (v.ok) check_reads(dir, m, blobs);
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}

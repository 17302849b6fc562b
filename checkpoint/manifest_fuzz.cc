// libFuzzer entry point over the checkpoint loading path.
//
// Input: manifest text, optionally followed by shard blobs, each introduced by the separator
// line "\n--shard--\n". The manifest is parsed (it must parse or throw CheckpointError, nothing
// else); if it parses, a checkpoint directory is built from the input -- manifest.json as
// given, shard file i holding blob i % #blobs (empty without blobs) -- and verified. Then the
// manifest's checksums and file sizes are fixed up to match the blobs, so that inputs get past
// the checksum gate, and the directory is verified again; when it verifies, every buffer is
// read back through CheckpointReader and compared with the bytes the manifest points at.
//
// Any exception other than CheckpointError escapes (a crash to libFuzzer, a failure in
// fuzz_corpus_test.cc). A checkpoint that verifies but then fails to read, or reads wrong
// data, throws std::logic_error.
//
// Built as a fuzzer only with clang (-fsanitize=fuzzer, see CMakeLists.txt); in the GCC build
// it is an ordinary function that fuzz_corpus_test.cc calls for every file of fuzz_corpus/.
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/manifest.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {
namespace {

constexpr char kSeparator[] = "\n--shard--\n";
constexpr size_t kMaxFuzzFiles = 16;
constexpr uint64_t kMaxFuzzElements = uint64_t{1} << 22;

// One scratch directory per process, removed at exit. Under /dev/shm when present: the fuzzer
// writes a directory per input and should not wear the disk.
class Scratch {
 public:
  Scratch() {
    std::string tmpl = io::is_directory("/dev/shm") ? "/dev/shm/rm_manifest_fuzz.XXXXXX"
                                                    : "/tmp/rm_manifest_fuzz.XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) root_ = tmpl;
  }
  ~Scratch() {
    try {
      if (!root_.empty()) io::remove_tree(root_);
    } catch (...) {
    }
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

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
      throw std::logic_error(std::string("verified checkpoint failed to read: ") + e.what());
    }
    for (size_t f = 0; f < m.files.size(); ++f) {
      const std::string& blob = blobs[f % blobs.size()];
      for (const PieceInfo& p : m.files[f].pieces) {
        if (p.buffer == b.name && p.bytes > 0) {
          std::memcpy(want.data() + p.begin, blob.data() + p.offset, p.bytes);
        }
      }
    }
    if (std::memcmp(got.data(), want.data(), b.count * sizeof(float)) != 0) {
      throw std::logic_error("buffer '" + b.name + "' read back differently from its pieces");
    }
  }
}

int fuzz_one(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t next = input.find(kSeparator, at);
    parts.push_back(input.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + sizeof(kSeparator) - 1;
  }
  const std::string text = parts[0];
  const std::vector<std::string> blobs(parts.begin() + 1, parts.end());

  std::optional<Manifest> parsed;
  try {
    parsed = parse_manifest(text, "fuzz/manifest.json");
  } catch (const CheckpointError&) {
    return 0;
  }
  Manifest m = *parsed;
  if (m.files.size() > kMaxFuzzFiles) return 0;

  static Scratch scratch;
  if (scratch.root().empty()) return 0;
  const std::string dir = io::join(scratch.root(), step_dir_name(m.step));
  build_dir(dir, text, m, blobs);
  verify_checkpoint(dir);  // returns its verdict; must not throw

  // Make the manifest agree with the blobs where it can, to reach the read path.
  if (blobs.empty()) return 0;
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
  return 0;
}

}  // namespace
}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rm::fuzz_one(data, size);
}

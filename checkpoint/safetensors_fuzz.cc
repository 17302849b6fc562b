// Fuzz target: the safetensors header reader (safetensors_writer.h), as `ckpt export` checks
// its output and as anything reading a .safetensors file would.
//
// Input: a whole .safetensors file (8-byte header length, JSON header, data), written to the
// scratch directory as `name` and read with read_safetensors_header().
//
// Contract (fuzz/fuzz_target.h): accepted = the header reads; rejected = CheckpointError whose
// message starts with the file's path. When it reads, the header must describe the file
// (lengths, tensors tiling the data), and every tensor it names is read: F32 tensors through
// read_safetensors_f32(), which must return exactly the file's bytes; other dtypes (and a name
// not in the file) must be refused by it with CheckpointError. Then the F32 tensors and metadata
// are written back with write_safetensors() and read again, and must come back the same.
// Anything else is a finding: another exception, a disagreement (std::logic_error), a crash, a
// sanitizer report, a hang, an allocation the file's size does not justify.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz/corpus_replay_test.cc
// replays fuzz/corpora/safetensors/ through it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/safetensors_writer.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_dir.h"

namespace rm {
namespace {

// The CheckpointError `read` throws, checked to name `path`; a finding if it throws none.
template <typename F>
void expect_refusal(const std::string& path, const std::string& what, F&& read) {
  try {
    read();
  } catch (const CheckpointError& e) {
    fuzz::rejected(e.what(), path + ": ");
    return;
  }
  fuzz::require(false, what + " was not refused");
}

// The header describes the file it was read from: lengths, and tensors tiling the data.
void check_header(const SafetensorsHeader& h, std::string_view file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), sizeof n);  // the reader accepted: the file has 8 bytes
  fuzz::require(h.header_bytes == n, "header_bytes is not the file's header length");
  fuzz::require(8 + h.header_bytes + h.data_bytes == file.size(),
                "header and data lengths do not add up to the file size");
  uint64_t at = 0;
  for (const SafetensorsEntry& e : h.tensors) {
    fuzz::require(e.begin == at && e.end >= e.begin, "tensor '" + e.name + "' is out of place");
    at = e.end;
  }
  fuzz::require(at == h.data_bytes, "the tensors do not tile the data");
}

// Reads every tensor; returns the F32 ones' values by name.
std::map<std::string, std::vector<float>> read_tensors(const std::string& path,
                                                       const SafetensorsHeader& h,
                                                       std::string_view file) {
  std::map<std::string, std::vector<float>> values;
  const char* data = file.data() + 8 + h.header_bytes;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.dtype != "F32") {
      expect_refusal(path, "reading " + e.dtype + " tensor '" + e.name + "' as F32",
                     [&] { read_safetensors_f32(path, h, e.name); });
      continue;
    }
    std::vector<float> v = read_safetensors_f32(path, h, e.name);
    fuzz::require(v.size() * sizeof(float) == e.end - e.begin &&
                      (v.empty() || std::memcmp(v.data(), data + e.begin, e.end - e.begin) == 0),
                  "tensor '" + e.name + "' reads back differently from the file's bytes");
    values[e.name] = std::move(v);
  }
  // Any string can be a tensor name: make up one the file lacks.
  const auto named = [&](const std::string& n) {
    return std::any_of(h.tensors.begin(), h.tensors.end(),
                       [&](const SafetensorsEntry& e) { return e.name == n; });
  };
  std::string missing = "?";
  while (named(missing)) missing += "?";
  expect_refusal(path, "reading a tensor the file does not have",
                 [&] { read_safetensors_f32(path, h, missing); });
  return values;
}

// write_safetensors(read(file)) reads back as the same tensors and metadata. Only for files of
// F32 tensors with non-empty names: the only dtype and the names the writer takes.
void check_rewrite(const SafetensorsHeader& h,
                   const std::map<std::string, std::vector<float>>& values) {
  std::vector<SafetensorsTensor> tensors;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.dtype != "F32" || e.name.empty()) return;
    tensors.push_back({e.name, "F32", e.shape, values.at(e.name).data()});
  }
  const std::string copy = fuzz::scratch_dir() + "/rewritten.safetensors";
  write_safetensors(copy, tensors, h.metadata);
  const SafetensorsHeader back = read_safetensors_header(copy);
  fuzz::require(back.metadata == h.metadata, "the rewritten file's metadata differs");
  fuzz::require(back.tensors.size() == h.tensors.size(), "the rewritten file's tensors differ");
  for (const SafetensorsEntry& e : back.tensors) {
    const auto it = values.find(e.name);
    fuzz::require(it != values.end(), "the rewritten file has a new tensor '" + e.name + "'");
    std::optional<std::vector<int64_t>> shape;
    for (const SafetensorsEntry& o : h.tensors) {
      if (o.name == e.name) shape = o.shape;
    }
    // Bytes, not floats: NaN != NaN, and the bits must survive anyway.
    const std::vector<float> v = read_safetensors_f32(copy, back, e.name);
    fuzz::require(
        e.dtype == "F32" && shape == e.shape && v.size() == it->second.size() &&
            (v.empty() || std::memcmp(v.data(), it->second.data(), v.size() * sizeof(float)) == 0),
        "tensor '" + e.name + "' differs in the rewritten file");
  }
}

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  const std::string path = fuzz::write_scratch_file(name, input);
  std::optional<SafetensorsHeader> header;
  try {
    header = read_safetensors_header(path);
  } catch (const CheckpointError& e) {
    return fuzz::rejected(e.what(), path + ": ");
  }
  check_header(*header, input);
  check_rewrite(*header, read_tensors(path, *header, input));
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}
